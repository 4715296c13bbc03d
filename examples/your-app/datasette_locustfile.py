"""Readers of a Datasette instance, written the way Locust's documentation writes a locustfile.

Notebook 10's first example runs it against Datasette serving a copy of a seeded shop (users and
items) read-only; `locust -f examples/your-app/datasette_locustfile.py --headless -u 8 -t 10s
--host http://127.0.0.1:8001` runs it as it is, against a Datasette you started yourself.
"""
import random

from locust import HttpUser, constant, task

USERS = 10_000  # uids 1..USERS exist in the shop's users table
ITEMS = 1_000   # ids 1..ITEMS in its items table


class ShopReader(HttpUser):
    wait_time = constant(0)  # closed loop, as the lab's own users: each sends when answered

    @task(6)
    def a_user_by_id(self):
        self.client.get(f"/shop/users/{random.randint(1, USERS)}.json", name="/shop/users/[uid].json")

    @task(3)
    def an_item_by_id(self):
        self.client.get(f"/shop/items/{random.randint(1, ITEMS)}.json?_shape=object",
                        name="/shop/items/[id].json")

    @task(1)
    def a_department_count(self):
        self.client.get("/shop.json?sql=select+departname,+count(*)+from+users+group+by+departname"
                        "+order+by+2+desc+limit+5&_shape=array", name="/shop.json?sql=[count by department]")
