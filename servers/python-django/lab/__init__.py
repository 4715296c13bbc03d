"""The lab's Django app: the four tables as models (managed=False), the endpoints as views."""
