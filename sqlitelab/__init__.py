"""SQLite Production Lab: the harness every notebook calls (notebooks hold no logic)."""
