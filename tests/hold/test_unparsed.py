#!/usr/bin/python3
"""Strings libpg_query cannot parse: never a drop without a trace (the scanner fallback, issue 14).

Each case is one Query through predrop whose text libpg_query 17 rejects: a PostgreSQL 18 form
before a DROP, a syntax error after a DROP, a DROP whose names are readable but whose tail is
garbage, unparsable TRUNCATE and ALTER TABLE forms, a DROP with a syntax error in its own name list.
Where the targets can be read from the tokens the statement is held and snapshotted exactly as a
parsed one (ledger row written); where they cannot, the ledger has a row `unparsed` with the
fingerprint and the normalised text (no literal), predrop_unparsed_statements_total counts it and
the log has a line. Before the fallback every one of these was relayed unheld with only a counter
raised.

A server rejects what its grammar rejects, and for these texts PostgreSQL 15 and 17 reject the whole
string, so they drop nothing; the held targets then end not_dropped. Two cases run with
standard_conforming_strings off, where a backslash escapes inside '...': 'a\\' x' is one literal to
the server (and an unterminated one to a lexer assuming the setting on), and 'a\\''; DROP TABLE
scs_hidden; --' is a SELECT and a DROP to the server but one SELECT, parsing cleanly, to such a
lexer. predrop lexes with the setting the server reported (ParameterStatus), so both DROPs are
held and snapshotted. Ground truth (the sql_drop event trigger): every relation the server dropped
has a snapshot captured before the drop, or its case an unparsed row.
"""
import re

import holdlib

SETUP = r"""
CREATE TABLE pg18_t (a int, b int);
CREATE TABLE err_after (a int);
CREATE TABLE tail_a (a int); CREATE TABLE tail_b (b int);
CREATE TABLE trunc_t (a int); INSERT INTO trunc_t VALUES (1);
CREATE TABLE alter_t (a int, c int);
CREATE TABLE list_a (a int); CREATE TABLE list_b (b int);
CREATE TABLE enforced_t (a int CONSTRAINT pos CHECK (a > 0)); CREATE TABLE after_unparsed (a int);
CREATE TABLE scs_t (a int); CREATE TABLE scs_hidden (a int);
ANALYZE;
"""

# (name, session statements run first, text, tables held (snapshot written), unparsed rows expected)
CASES = [
    ("postgresql 18 syntax then drop", [],
     "ALTER TABLE pg18_t ADD COLUMN g int GENERATED ALWAYS AS (a * 2) VIRTUAL; DROP TABLE pg18_t",
     ["pg18_t"], 1),
    ("syntax error after a drop", [],
     "DROP TABLE err_after; SELEC 1",
     ["err_after"], 0),
    ("names readable, tail garbage", [],
     "DROP TABLE tail_a, tail_b CASCADE garbage here",
     ["tail_a", "tail_b"], 0),
    ("unparsable truncate", [],
     "TRUNCATE ONLY trunc_t RESTART IDENTITY garbage",
     ["trunc_t"], 0),
    ("unparsable alter table with a drop column", [],
     "ALTER TABLE alter_t DROP COLUMN c, ADD COLUMN g int GENERATED ALWAYS AS (a) VIRTUAL",
     ["alter_t"], 0),
    ("syntax error in the drop's own name list", [],
     "DROP TABLE list_a,, list_b WHERE note = 'hunter2'",
     [], 1),
    ("unreadable alter table, then a drop", [],
     "ALTER TABLE enforced_t ALTER CONSTRAINT pos NOT ENFORCED; DROP TABLE after_unparsed",
     ["after_unparsed"], 1),
    ("a backslash-escaped quote (standard_conforming_strings off)",
     ["SET standard_conforming_strings = off"],
     "SELECT 'a\\' x'; DROP TABLE scs_t",
     ["scs_t"], 0),
    ("a DROP inside what would be a literal with standard_conforming_strings on",
     ["SET standard_conforming_strings = off"],
     "SELECT 'a\\''; DROP TABLE scs_hidden; --'",
     ["scs_hidden"], 0),
]


def test(h):
    version = h.q("SELECT current_setting('server_version_num')::int")[0][0]
    print("# server_version_num %d" % version)
    h.exec(SETUP)
    h.start_predrop("--hold-timeout-ms", "10000")
    unparsed_total = 0
    for name, session, text, held, unparsed in CASES:
        before = len(h.events("outcome = 'unparsed'"))
        oids = {t: h.oid("public." + t) for t in held}
        truth_before = len(h.truth())
        r = h.psql(*(session + [text]))
        print("# %s: %r -> %s" % (name, text, r))
        for t in held:
            got = h.check_event("public", t, "written", oid=oids[t], label="%s: %s" % (name, t))
            if got:
                dropped = bool(h.truth("objid = %s", (oids[t],)))
                want = "dropped" if dropped else "not_dropped"
                h.check_event("public", t, "written", want, oid=oids[t], label="%s: %s" % (name, t))
        if unparsed:
            h.wait_for(lambda: len(h.events("outcome = 'unparsed'")) - before >= unparsed, timeout=10)
        rows = h.events("outcome = 'unparsed'")[before:]
        h.check(len(rows) == unparsed, "%s: %d unparsed ledger row(s)" % (name, unparsed),
                [(e["statement"], e["fingerprint"]) for e in rows])
        for e in rows:
            h.check(bool(re.fullmatch(r"[0-9a-f]{16}", e["fingerprint"] or "")),
                    "%s: the unparsed row has a fingerprint" % name, e["fingerprint"])
            h.check(bool(e["statement"]) and "hunter2" not in e["statement"],
                    "%s: the unparsed row has the normalised text, without the literal" % name, e["statement"])
            h.check(e["database_name"] == h.db and e["table_name"] is None,
                    "%s: the unparsed row names the database and no table" % name,
                    (e["database_name"], e["table_name"]))
        unparsed_total += unparsed
        if unparsed == 0:
            # No case's server run drops anything predrop did not hold.
            new = h.truth()[truth_before:]
            h.check(all(t[1] in held for t in new), "%s: the server dropped only held tables" % name,
                    [t[1] for t in new])

    h.check(h.metric("predrop_unparsed_statements_total") == unparsed_total,
            "predrop_unparsed_statements_total is %d" % unparsed_total, h.metric("predrop_unparsed_statements_total"))
    lines = [ln for ln in h.log_text().splitlines() if "recorded as unparsed" in ln]
    h.check(len(lines) == unparsed_total, "one log line per unparsed text", lines)
    h.check(not any("hunter2" in ln for ln in h.log_text().splitlines()), "the log has no literal of the texts")

    # Ground truth: a relation the server dropped has a snapshot from before the drop, or (only
    # where the targets could not be read) its text an unparsed ledger row.
    dropped = h.truth()
    print("# truth: dropped %s" % sorted("%s.%s" % (t[0], t[1]) for t in dropped))
    h.check_captured_before_drop(dropped)
    names = [t[1] for t in dropped]
    h.check("scs_t" in names and "scs_hidden" in names,
            "the server dropped both standard_conforming_strings=off tables (and predrop held them)", names)
    bad = [(e["outcome"], e["table_name"], e["error"]) for e in h.events()
           if e["outcome"] not in ("written", "unparsed")]
    h.check(not bad, "no ledger row with another outcome", bad)


if __name__ == "__main__":
    holdlib.main(test, "unparsed")
