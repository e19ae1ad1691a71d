#!/usr/bin/python3
"""libpq (the system's libpq.so.5 through ctypes) through a quarantine rule sees what the server says
to the DROP itself (issue 16): pipeline mode, a PQprepare'd (named) DROP executed several times,
PQexecParams. What the client saw is every result in order (status, PQcmdStatus, every error field)
with every notice (every field) where it arrived, compared direct and through predrop.

A pipeline whose later statement fails before the Sync rolls the DROP back with it: nothing stays in
quarantine. Each execution of the prepared DROP quarantines that execution's table (its own OID).
DROP TABLE then DROP TABLE IF EXISTS of one table before one Sync: the first is quarantined and holds
the quarantine's row, the second (which moved nothing) is not_dropped.
"""
import ctypes
import ctypes.util

import wirelib

STATUS = {0: "EMPTY_QUERY", 1: "COMMAND_OK", 2: "TUPLES_OK", 5: "BAD_RESPONSE", 6: "NONFATAL_ERROR",
          7: "FATAL_ERROR", 10: "PIPELINE_SYNC", 11: "PIPELINE_ABORTED"}
# Every field an ErrorResponse or NoticeResponse may carry.
FIELDS = "SVCMDHPpqWstcdnFLR"
NOTICE_RECEIVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def load():
    lib = ctypes.CDLL(ctypes.util.find_library("pq") or "libpq.so.5")
    sig = {
        "PQconnectdb": (ctypes.c_void_p, [ctypes.c_char_p]),
        "PQstatus": (ctypes.c_int, [ctypes.c_void_p]),
        "PQerrorMessage": (ctypes.c_char_p, [ctypes.c_void_p]),
        "PQfinish": (None, [ctypes.c_void_p]),
        "PQsetNoticeReceiver": (ctypes.c_void_p, [ctypes.c_void_p, NOTICE_RECEIVER, ctypes.c_void_p]),
        "PQsendQuery": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
        "PQsendQueryParams": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]),
        "PQsendPrepare": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                         ctypes.c_void_p]),
        "PQsendQueryPrepared": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]),
        "PQgetResult": (ctypes.c_void_p, [ctypes.c_void_p]),
        "PQresultStatus": (ctypes.c_int, [ctypes.c_void_p]),
        "PQresultErrorField": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int]),
        "PQcmdStatus": (ctypes.c_char_p, [ctypes.c_void_p]),
        "PQntuples": (ctypes.c_int, [ctypes.c_void_p]),
        "PQgetvalue": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
        "PQclear": (None, [ctypes.c_void_p]),
        "PQenterPipelineMode": (ctypes.c_int, [ctypes.c_void_p]),
        "PQexitPipelineMode": (ctypes.c_int, [ctypes.c_void_p]),
        "PQpipelineSync": (ctypes.c_int, [ctypes.c_void_p]),
        "PQtransactionStatus": (ctypes.c_int, [ctypes.c_void_p]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


LIB = load()


def fields(res):
    out = {}
    for f in FIELDS:
        v = LIB.PQresultErrorField(res, ord(f))
        if v is not None:
            out[f] = v.decode()
    return out


class Conn:
    """One libpq connection; `seen` is everything the client saw, in order."""

    def __init__(self, conninfo):
        self.c = LIB.PQconnectdb(conninfo.encode())
        if LIB.PQstatus(self.c) != 0:
            raise RuntimeError("libpq connect: %s" % LIB.PQerrorMessage(self.c).decode())
        self.seen = []
        self._receiver = NOTICE_RECEIVER(lambda _arg, res: self.seen.append(("notice", fields(res))))
        LIB.PQsetNoticeReceiver(self.c, self._receiver, None)

    def _result(self, res):
        st = LIB.PQresultStatus(res)
        row = [STATUS.get(st, str(st)), LIB.PQcmdStatus(res).decode()]
        if st == 7:
            row.append(fields(res))
        if st == 2:
            row.append([LIB.PQgetvalue(res, i, 0).decode() for i in range(LIB.PQntuples(res))])
        self.seen.append(tuple(row))
        return st

    def drain(self):
        """Results of one command (until libpq's NULL)."""
        while True:
            res = LIB.PQgetResult(self.c)
            if not res:
                return
            self._result(res)
            LIB.PQclear(res)

    def query(self, sql):
        """A simple-protocol Query (every statement's result)."""
        if LIB.PQsendQuery(self.c, sql.encode()) != 1:
            raise RuntimeError(LIB.PQerrorMessage(self.c).decode())
        self.drain()

    def params(self, sql):
        if LIB.PQsendQueryParams(self.c, sql.encode(), 0, None, None, None, None, 0) != 1:
            raise RuntimeError(LIB.PQerrorMessage(self.c).decode())
        self.drain()

    def prepare(self, name, sql):
        if LIB.PQsendPrepare(self.c, name.encode(), sql.encode(), 0, None) != 1:
            raise RuntimeError(LIB.PQerrorMessage(self.c).decode())
        self.drain()

    def exec_prepared(self, name):
        if LIB.PQsendQueryPrepared(self.c, name.encode(), 0, None, None, None, 0) != 1:
            raise RuntimeError(LIB.PQerrorMessage(self.c).decode())
        self.drain()

    def value(self, sql):
        """A value the test needs that the comparison must not see (an OID differs between sides)."""
        mark = len(self.seen)
        self.query(sql)
        row = self.seen[mark:]
        del self.seen[mark:]
        return row[-1][2][0] if row and row[-1][0] == "TUPLES_OK" else None

    def pipeline(self, groups):
        """Each group's statements (PQsendQueryParams) then a PQpipelineSync; every result read."""
        if LIB.PQenterPipelineMode(self.c) != 1:
            raise RuntimeError("PQenterPipelineMode: %s" % LIB.PQerrorMessage(self.c).decode())
        for g in groups:
            for sql in g:
                if LIB.PQsendQueryParams(self.c, sql.encode(), 0, None, None, None, None, 0) != 1:
                    raise RuntimeError("PQsendQueryParams: %s" % LIB.PQerrorMessage(self.c).decode())
            LIB.PQpipelineSync(self.c)
        syncs, nulls = 0, 0
        while syncs < len(groups) and nulls < 100:
            res = LIB.PQgetResult(self.c)
            if not res:
                nulls += 1
                continue
            if self._result(res) == 10:
                syncs += 1
            LIB.PQclear(res)
        if syncs != len(groups):
            self.seen.append(("missing syncs", len(groups) - syncs))
        LIB.PQexitPipelineMode(self.c)

    def close(self):
        LIB.PQfinish(self.c)


SETUP = r"""
CREATE TABLE p_ok (a int); CREATE TABLE p_fail (a int); CREATE TABLE p_err (a int);
CREATE TABLE pc (a int); CREATE VIEW pc_v AS SELECT a FROM pc;
CREATE TABLE pd (a int); CREATE VIEW pd_v AS SELECT a FROM pd;
CREATE TABLE x_par (a int); CREATE TABLE x_rb (a int); CREATE TABLE p_twice (a int);
"""


def test(w):
    w.setup(SETUP)
    w.start()
    oid = {n: w.oid("public." + n) for n in ("p_ok", "p_fail", "p_err", "pc", "pd", "x_par", "x_rb", "p_twice")}
    prepared_oids = []

    def both(label, fn):
        seen = []
        for side, host, port, db in w.sides():
            c = Conn("host=%s port=%d dbname=%s user=postgres application_name=wire_libpq" % (host, port, db))
            try:
                fn(c, side)
            finally:
                c.close()
            seen.append(c.seen)
        return w.same("libpq " + label, seen[0], seen[1])

    both("pipeline: CREATE; DROP; SELECT; Sync",
         lambda c, _: c.pipeline([["CREATE TABLE p_new (a int)", "DROP TABLE p_ok", "SELECT 1"],
                                  ["SELECT to_regclass('p_new') IS NOT NULL"]]))
    w.check_quarantined("public.p_ok", oid["p_ok"])

    both("pipeline: DROP then a failing statement before the Sync",
         lambda c, _: c.pipeline([["DROP TABLE p_fail", "SELECT 1/0", "SELECT 2"],
                                  ["SELECT to_regclass('p_fail') IS NOT NULL"]]))
    w.check_kept("public.p_fail", oid["p_fail"], "failed pipeline")

    both("pipeline: a DROP the server refuses (2BP01, 42P01) and later statements aborted",
         lambda c, _: c.pipeline([["DROP TABLE pd", "DROP TABLE p_err"], ["DROP TABLE p_missing", "SELECT 1"],
                                  ["SELECT 3"]]))
    w.check_kept("public.pd", oid["pd"], "pipeline 2BP01")
    w.check_kept("public.p_err", oid["p_err"], "pipeline aborted after 2BP01")

    def prepared(c, side):
        c.prepare("drop_pp", "DROP TABLE pp")
        for _ in range(3):
            c.query("CREATE TABLE pp (a int, b text)")
            if side == "via":
                prepared_oids.append(int(c.value("SELECT 'pp'::regclass::oid")))
            c.exec_prepared("drop_pp")
        c.exec_prepared("drop_pp")        # no pp now: the server's 42P01
        c.prepare("drop_pc", "DROP TABLE pc CASCADE")
        c.exec_prepared("drop_pc")
        c.exec_prepared("drop_pc")
    both("a named prepared DROP executed several times", prepared)
    w.check(len(set(prepared_oids)) == 3, "prepared DROP: three executions, three tables", prepared_oids)
    for o in prepared_oids:
        w.check_quarantined("public.pp", o)
    w.check_quarantined("public.pc", oid["pc"])

    both("PQexecParams: DROP, IF EXISTS of a missing table, a view named in DROP TABLE",
         lambda c, _: [c.params("DROP TABLE x_par"), c.params("DROP TABLE IF EXISTS x_missing"),
                       c.params("DROP TABLE pd_v")])
    w.check_quarantined("public.x_par", oid["x_par"])

    both("extended protocol in a transaction rolled back",
         lambda c, _: [c.params("BEGIN"), c.params("DROP TABLE x_rb"), c.params("ROLLBACK"),
                       c.params("SELECT to_regclass('x_rb') IS NOT NULL")])
    w.check_kept("public.x_rb", oid["x_rb"], "extended ROLLBACK")

    both("pipeline: DROP TABLE then DROP TABLE IF EXISTS of one table before one Sync",
         lambda c, _: c.pipeline([["DROP TABLE p_twice", "DROP TABLE IF EXISTS p_twice"]]))
    # Two holds (each Execute is held apart), the second's move finding nothing: the ledger gives the
    # quarantine to the first DROP, whose move stood, by the hold id in the table's comment.
    w.check_quarantined("public.p_twice", oid["p_twice"], ledger=False)
    w.check_first_stood(oid["p_twice"], "p_twice")

    w.check(w.quarantine_count() == 7, "seven tables in quarantine (p_ok, pp x3, pc, x_par, p_twice)",
            w.quarantine_count())


if __name__ == "__main__":
    wirelib.main(test, "wire_libpq")
