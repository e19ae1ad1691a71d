"""libpq's pipeline mode from Python through ctypes (the system's libpq.so.5, PostgreSQL 14 or later):
a real libpq pipeline without a compiled helper.

    pipeline(conninfo, [["CREATE TABLE a (x int)", "SELECT 1/0"], ["CREATE TABLE b (x int)"]])
    -> [["COMMAND_OK", "FATAL_ERROR/22012"], ["COMMAND_OK"]]   # per PQpipelineSync, each statement's result
"""
import ctypes
import ctypes.util

PGRES = {0: "EMPTY_QUERY", 1: "COMMAND_OK", 2: "TUPLES_OK", 7: "FATAL_ERROR", 10: "PIPELINE_SYNC", 11: "PIPELINE_ABORTED"}


def libpq():
    name = ctypes.util.find_library("pq") or "libpq.so.5"
    lib = ctypes.CDLL(name)
    lib.PQconnectdb.restype = ctypes.c_void_p
    lib.PQconnectdb.argtypes = [ctypes.c_char_p]
    for f in ("PQstatus", "PQenterPipelineMode", "PQpipelineSync", "PQexitPipelineMode"):
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    lib.PQsendQueryParams.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.PQgetResult.restype = ctypes.c_void_p
    lib.PQgetResult.argtypes = [ctypes.c_void_p]
    lib.PQresultStatus.argtypes = [ctypes.c_void_p]
    lib.PQresultErrorField.restype = ctypes.c_char_p
    lib.PQresultErrorField.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.PQclear.argtypes = [ctypes.c_void_p]
    lib.PQfinish.argtypes = [ctypes.c_void_p]
    lib.PQerrorMessage.restype = ctypes.c_char_p
    lib.PQerrorMessage.argtypes = [ctypes.c_void_p]
    return lib


def pipeline(conninfo, groups):
    """Each group's statements (PQsendQueryParams: Parse/Bind/Describe/Execute) then a PQpipelineSync;
    returns per group the statuses (and SQLSTATE of errors) libpq reported."""
    lib = libpq()
    c = lib.PQconnectdb(conninfo.encode())
    if lib.PQstatus(c) != 0:
        raise RuntimeError("libpq connect: %s" % lib.PQerrorMessage(c).decode())
    if lib.PQenterPipelineMode(c) != 1:
        raise RuntimeError("PQenterPipelineMode: %s" % lib.PQerrorMessage(c).decode())
    for g in groups:
        for sql in g:
            if lib.PQsendQueryParams(c, sql.encode(), 0, None, None, None, None, 0) != 1:
                raise RuntimeError("PQsendQueryParams: %s" % lib.PQerrorMessage(c).decode())
        lib.PQpipelineSync(c)
    out, cur, syncs, nulls = [], [], 0, 0
    while syncs < len(groups) and nulls < 1000:
        r = lib.PQgetResult(c)
        if not r:
            nulls += 1
            continue
        st = lib.PQresultStatus(r)
        if st == 10:
            out.append(cur)
            cur = []
            syncs += 1
        else:
            code = lib.PQresultErrorField(r, ord("C")) if st == 7 else None
            cur.append(PGRES.get(st, str(st)) + ("/" + code.decode() if code else ""))
        lib.PQclear(r)
    lib.PQexitPipelineMode(c)
    lib.PQfinish(c)
    return out
