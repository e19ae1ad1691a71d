#!/usr/bin/env python3
"""Plays the decoder's probe sessions on bare sockets through record-session.py, so that each
fixture holds what a real server answers to an exact byte sequence no client library sends.

record-probes.py RECORDER_PORT DATABASE
Each probe is one connection (recorded as OUT_PREFIX.n in the order below); prints what the
server answered, which the replay test asserts.
"""
import os
import struct
import sys

# The wire messages are the hold probes' own (tests/hold/rawpg.py); only a Bind with result-format
# codes is this file's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "hold"))
from rawpg import Raw, cstr, error_fields, execute, message, parse, query, sync, terminate  # noqa: E402


def bind(portal, stmt, result_formats=0):
    return message(b"B", cstr(portal) + cstr(stmt) + b"\0\0" + b"\0\0" + struct.pack("!H", result_formats)
                   + b"\0\0" * result_formats)


def summary(msgs):
    """The server's answer as short text: type letters, SQLSTATEs, and the start of tags and rows."""
    out = []
    for t, body in msgs:
        if t == "E":
            out.append("E[%s]" % error_fields(body).get("C"))
        elif t in "CD":
            out.append("%s[%s]" % (t, body[:60].replace(b"\0", b"|").decode(errors="replace")))
        else:
            out.append(t)
    return " ".join(out)


class Conn(Raw):
    def run(self, data, readies):
        self.send(data)
        return summary(self.read_until_ready(readies))

    def close(self):
        self.send(terminate())
        super().close()


def probe(port, db, name, steps):
    c = Conn(port, db)
    print("==", name)
    for data, readies in steps:
        print("  ", c.run(data, readies))
    c.close()


def main():
    port, db = int(sys.argv[1]), sys.argv[2]
    evil = "SET search_path = dectest_evil"
    show = query("SHOW search_path")
    # 0: an extended-protocol segment is one implicit transaction: its error rolls back a SET before it.
    probe(port, db, "extended SET then error before Sync", [
        (parse("", evil) + bind("", "") + execute("") + parse("", "SELECT 1/0") + bind("", "") + execute("") + sync(), 1),
        (show, 1)])
    # 1: SET LOCAL in an extended segment lasts until its Sync.
    probe(port, db, "extended SET LOCAL then SHOW before Sync", [
        (parse("", "SET LOCAL search_path = dectest_evil") + bind("", "") + execute("")
         + parse("", "SHOW search_path") + bind("", "") + execute("") + sync(), 1),
        (show, 1)])
    # 2: an ErrorResponse longer than 64 KiB, simple and extended.
    big = "SELECT repeat('x', 70000)::int"
    probe(port, db, "error longer than 64 KiB", [
        (query(evil + "; " + big), 1),
        (show, 1),
        (parse("", big) + bind("", "") + execute("") + parse("", "SELECT 2") + bind("", "") + execute("") + sync(), 1),
        (query("SELECT 3"), 1)])
    # 3: a Bind longer than max_inspect_bytes (1,200 bytes of result format codes) to a DROP.
    probe(port, db, "Bind of a DROP longer than 1024 bytes", [
        (query("DROP TABLE IF EXISTS dectest_victim; CREATE TABLE dectest_victim (x int)"), 1),
        (parse("s1", "DROP TABLE dectest_victim") + sync(), 1),
        (bind("p", "s1", 600) + execute("p") + sync(), 1),
        (query("SELECT to_regclass('dectest_victim') IS NULL AS dropped"), 1)])
    # 4: portal names compared on their first 63 bytes.
    probe(port, db, "5,000-byte portal name", [
        (parse("", "SELECT 42") + bind("a" * 5000, "") + execute("a" * 63 + "b" * 100) + sync(), 1)])
    # 5: a Parse of a name taken is refused; after DEALLOCATE it is not.
    probe(port, db, "re-Parse of a named statement", [
        (parse("s", "DROP TABLE IF EXISTS dectest_nothing") + sync(), 1),
        (parse("s", "SELECT 1") + sync(), 1),
        (query("DEALLOCATE s"), 1),
        (parse("s", "SELECT 1") + sync(), 1)])
    # 6: COPY FROM STDIN by Execute with its Sync sent before the data: the server ignores a Sync
    # in copy-in mode and answers only the one after CopyDone.
    probe(port, db, "extended COPY IN with a Sync before the data", [
        (query("DROP TABLE IF EXISTS dectest_copy; CREATE TABLE dectest_copy (x int)"), 1),
        (parse("", "COPY dectest_copy FROM STDIN") + bind("", "") + execute("") + sync()
         + message(b"d", b"1\n2\n") + message(b"c") + sync(), 1),
        (query("SELECT count(*) FROM dectest_copy"), 1)])
    # 7: the same with a COPY that fails before it begins (no such table): the server ignores the
    # CopyData and CopyDone that arrive outside COPY mode and answers the next Parse as usual.
    probe(port, db, "extended COPY IN of a missing table, data pipelined", [
        (parse("", "COPY dectest_no_such_table FROM STDIN") + bind("", "") + execute("") + sync()
         + message(b"d", b"1\n") + message(b"c") + parse("", "SELECT 1") + bind("", "") + execute("") + sync(), 2),
        (query("SELECT 2"), 1)])


if __name__ == "__main__":
    main()
