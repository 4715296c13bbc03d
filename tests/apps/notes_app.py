"""A small production-style app over SQLite that nobody on the project would write this way: the
standard library's threading HTTP server, one connection per request, its table created at start
(`CREATE TABLE IF NOT EXISTS`), and a lock that reaches a writer answered as a 500 HTML page.

    python notes_app.py --port 8000 --db notes.db

GET / answers 200 ("ok"); GET /notes/<id> a note as JSON (404 when there is none); POST /notes
stores the request's body as a note and answers 201 with its id.
"""
import argparse
import json
import sqlite3
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCKED = b"<html><body><h1>500 Internal Server Error</h1><p>database is locked</p></body></html>"


def connect(db):
    con = sqlite3.connect(db, timeout=0.05)  # a short busy wait: some concurrent writes will fail
    con.execute("PRAGMA journal_mode=wal")
    return con


class Notes(BaseHTTPRequestHandler):
    db = None

    def log_message(self, *args):  # quiet
        pass

    def answer(self, status, body, kind="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/":
            return self.answer(200, b"ok", "text/plain")
        if self.path.startswith("/notes/") and self.path[7:].isdigit():
            con = connect(self.db)
            try:
                row = con.execute("SELECT id, body FROM notes WHERE id = ?", (int(self.path[7:]),)).fetchone()
            finally:
                con.close()
            if row is None:
                return self.answer(404, b'{"error": "no such note"}')
            return self.answer(200, json.dumps({"id": row[0], "body": row[1]}).encode())
        return self.answer(404, b'{"error": "not found"}')

    def do_POST(self):
        if self.path != "/notes":
            return self.answer(404, b'{"error": "not found"}')
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode(errors="replace")
        con = connect(self.db)
        try:
            with con:
                cur = con.execute("INSERT INTO notes (body) VALUES (?)", (body,))
            return self.answer(201, json.dumps({"id": cur.lastrowid}).encode())
        except sqlite3.OperationalError as e:
            if "locked" in str(e):
                return self.answer(500, LOCKED, "text/html")
            raise
        finally:
            con.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", required=True)
    args = ap.parse_args()
    con = connect(args.db)
    con.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    con.commit()
    con.close()
    Notes.db = args.db
    ThreadingHTTPServer(("127.0.0.1", args.port), Notes).serve_forever()


if __name__ == "__main__":
    main()
