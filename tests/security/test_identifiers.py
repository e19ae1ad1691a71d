#!/usr/bin/python3
"""Hostile and unusual identifiers through predrop: quotes, semicolons, $$, backslashes, spaces, braces,
Unicode, upper case, exactly 63-byte names and longer ones the server truncates, in schemas with such
names too. Each drop gets a snapshot under exactly the server's names (compared with the sql_drop event
trigger's), no capture or store statement fails, and nothing a name carries is executed."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("PREDROP_SOURCE_DIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "hold"))
import holdlib  # noqa: E402

NAMES = [
    'q"uote', "s'quote", "semi;colon", "dollar$$sign", "$$", "back\\slash", "trail\\", "with space",
    "año", "🦊 fox", "UPPER", "MiXeD", "{br,ace}", "NULL", "%s%d", "x'); DROP TABLE victim; --",
    'x"; DROP TABLE victim; --', "tab\tand\nnewline",
    "n" * 63,                       # exactly NAMEDATALEN - 1 bytes
    "ñ" * 31 + "x",                 # 63 bytes, multibyte
    "L" * 70,                       # truncated by the server to 63 bytes
    "é" * 40,                       # 80 bytes: truncated on a character boundary (62 bytes)
]
SCHEMAS = ['sch"ema; $$ ñ', "Sch'ema\\🦊", "s" * 63]


def qi(name):
    return '"' + name.replace('"', '""') + '"'


def server_name(h, name):
    """What the server makes of the identifier (truncation included)."""
    return h.q("SELECT %s::name::text", (name,))[0][0]


def test(h):
    h.exec("CREATE TABLE public.victim (a int)")
    for s in SCHEMAS:
        h.exec("CREATE SCHEMA %s" % qi(s))
    plan = []   # (schema, table, how)
    for i, n in enumerate(NAMES):
        schema = SCHEMAS[i % len(SCHEMAS)]
        h.exec("CREATE TABLE %s.%s (%s int, b text)" % (qi(schema), qi(n), qi(n)))
        h.exec("CREATE TABLE public.%s (a int)" % qi(n))
        plan.append((schema, n))
    h.exec("ANALYZE")
    h.start_predrop("--hold-timeout-ms", "10000")

    for i, (schema, n) in enumerate(plan):
        # Qualified; then unqualified through a SET search_path in the same Query, or from psycopg2 in a transaction.
        r = h.psql("DROP TABLE %s.%s" % (qi(schema), qi(n)))
        h.check(r.rc == 0, "DROP TABLE %s.%s" % (qi(schema), qi(n)), r)
        if i % 2:
            r = h.psql("SET search_path = %s, public; DROP TABLE %s" % (qi(SCHEMAS[0]), qi(n)))
        else:
            c = h.pconnect(autocommit=False)
            with c.cursor() as cur:
                cur.execute("SET LOCAL search_path = public")
                cur.execute("DROP TABLE " + qi(n))
            c.commit()
            c.close()
            r = holdlib.Run(0, "", "", 0)
        h.check(r.rc == 0, "unqualified DROP TABLE %s (public)" % qi(n), r)
    # A whole hostile schema at once.
    h.exec("CREATE TABLE %s.%s (a int)" % (qi(SCHEMAS[1]), qi("left over")))
    r = h.psql("DROP SCHEMA %s CASCADE" % qi(SCHEMAS[1]))
    h.check(r.rc == 0, "DROP SCHEMA %s CASCADE" % qi(SCHEMAS[1]), r)

    h.check(h.exists("public.victim"), "nothing a name carried was executed (public.victim exists)")
    truth = h.truth()
    h.check(len(truth) == 2 * len(NAMES) + 1, "the server dropped %d tables (expected %d)" % (len(truth), 2 * len(NAMES) + 1))
    h.check_captured_before_drop(truth, "identifiers: ")
    mismatched = []
    for schema, name, objid, _, _, _ in truth:
        snaps = h.snapshots("table_oid = %s", (objid,))
        got = sorted({(s["schema_name"], s["table_name"]) for s in snaps})
        if got != [(schema, name)]:
            mismatched.append(((schema, name), got))
    h.check(not mismatched, "every snapshot carries exactly the server's schema and table name", mismatched)
    # Column names are the server's too.
    snaps = h.snapshots("table_name = %s", (server_name(h, NAMES[0]),))
    h.check(snaps and any(h.snapshot_columns(s) == [NAMES[0], "b"] for s in snaps),
            "a column named like the table is in the snapshot", [h.snapshot_columns(s) for s in snaps])

    events = h.events()
    bad = [(e["outcome"], e["schema_name"], e["table_name"], e["error"]) for e in events if e["outcome"] != "written"]
    h.check(not bad, "every ledger row is 'written' (no capture or store error)", bad)
    # What the ledger records for names the server truncates: the server's name, as the snapshot.
    for n in ("L" * 70, "é" * 40):
        want = server_name(h, n)
        rows = sorted({(e["table_name"]) for e in events if e["table_name"] and e["table_name"].startswith(n[:10])})
        print("# %d-byte name %s...: server keeps %d bytes; ledger table_name(s): %s"
              % (len(n.encode()), n[:4], len(want.encode()), [(len(r.encode()), r == want) for r in rows]))
        h.check(rows == [want], "ledger names the %d-byte table as the server truncated it (%d bytes)"
                % (len(n.encode()), len(want.encode())), [len(r.encode()) for r in rows])
    log = h.log_text()
    errs = [l for l in log.splitlines() if " error " in l or "capture_error" in l or "store_error" in l or "syntax" in l]
    h.check(not errs, "no error in predrop's log", errs[:5])

    h.stop_predrop()
    fail_closed_messages(h)


# A refused statement (fail closed) is answered by SQL predrop writes, with the table's name in the
# error text: names that try to end its string literal or dollar quote must come back verbatim in a
# 55000 error, with standard_conforming_strings on and off.
HOSTILE = [
    "x$predrop$; DROP TABLE public.victim; DO $predrop$BEGIN --",   # < 64 bytes: kept whole
    "x'); DROP TABLE public.victim; --",
    "x\\'; END$predrop$; DROP TABLE public.victim; --",
    "x\\", "$predrop0$ $predrop$",
]


def fail_closed_messages(h):
    for n in HOSTILE:
        h.exec("CREATE TABLE public.%s (a int)" % qi(n))
    closed = holdlib.free_port()
    h.start_predrop("--hold-timeout-ms", "3000", "--no-migrate",
                    store="host=127.0.0.1 port=%d dbname=nowhere user=postgres connect_timeout=1" % closed,
                    config="default: {action: snapshot, on_failure: closed}\n")
    for i, n in enumerate(HOSTILE):
        scs = "on" if i % 2 else "off"
        c = h.pconnect()
        err = None
        try:
            with c.cursor() as cur:
                cur.execute("SET standard_conforming_strings = " + scs)
                try:
                    cur.execute("DROP TABLE public." + qi(n))
                except Exception as e:  # noqa: BLE001
                    err = e
        finally:
            c.close()
        code = getattr(err, "pgcode", None)
        msg = getattr(getattr(err, "diag", None), "message_primary", "") or ""
        h.check(code == "55000" and ("public." + n) in msg,
                "fail closed, standard_conforming_strings=%s, table %r: 55000 naming the table verbatim" % (scs, n),
                "%s %r" % (code, msg[:300]))
        h.check(h.exists("public." + qi(n)), "the refused table %r still exists" % n)
    h.check(h.exists("public.victim"), "nothing a name carried was executed in the refusal (public.victim exists)")
    h.stop_predrop()


if __name__ == "__main__":
    holdlib.main(test, "identifiers")
