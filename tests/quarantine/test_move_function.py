"""The move as a function (issue 21): the prepare installs it once per database in a schema of its
own, a quarantined DROP calls it, and where it is missing or out of reach the call says so (the
proxy then falls back) and the inline block moves with the same result.

The function's path is proven taken by replacing its body with one that raises: the move must then
fail with that message. The inline path is proven by dropping the function's schema, and by a role
that may not use it. The capture's check (quarantine::move_function_check_sql) must agree."""
import threading

import qlib

FN_SCHEMA = "predrop_quarantine_move"


def held_names(q):
    return sorted(h["detail"]["table"] for h in q.held())


def comparable(detail):
    # What a move records that does not depend on when or which OID.
    return {k: v for k, v in detail.items() if k in ("schema", "comment", "dependents", "partition_of", "detached")} | {
        "relations": [r["kind"] for r in detail["relations"]],
        "members": [m["bound"] for m in detail["members"]]}


def body(q):
    for t in ("a", "b", "c", "d"):
        q.owner(f"CREATE TABLE {t} (id serial PRIMARY KEY, v text CHECK (v <> '')) PARTITION BY RANGE (id)")
        q.owner(f"CREATE TABLE {t}_1 PARTITION OF {t} FOR VALUES FROM (1) TO (100)")
        q.owner(f"INSERT INTO {t} (v) VALUES ('x')")

    fns = q.su(f"SELECT p.proname, p.prosecdef, pg_get_userbyid(p.proowner), p.proconfig FROM pg_proc p "
               f"JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = '{FN_SCHEMA}'")
    q.check(len(fns) == 1 and fns[0][0].startswith("move_"), "the prepare installed one move function", fns)
    fn = fns[0][0] if fns else "missing"
    q.check(fns and not fns[0][1], "the function runs as its caller (SECURITY INVOKER)", fns)
    q.check(fns and fns[0][2] == q.role("cap"), "the capture role owns it", fns)
    # Its catalog queries take a variable each: without generic plans the server plans each of
    # them again at every call (issue 21).
    q.check(fns and fns[0][3] == ["plan_cache_mode=force_generic_plan"],
            "the function keeps generic plans, as its own setting", fns)
    owner = q.role("owner")
    q.check(q.value(f"SELECT has_schema_privilege('{owner}', '{FN_SCHEMA}', 'USAGE') AND "
                    f"NOT has_schema_privilege('{owner}', '{FN_SCHEMA}', 'CREATE') AND "
                    f"has_function_privilege('{owner}', '{FN_SCHEMA}.{fn}(jsonb)', 'EXECUTE')"),
            "everyone may call it; nobody but its owner may create beside it")
    q.run_sql(q.role("cap"), q.sql_print("prepare"))
    q.check(q.value(f"SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                    f"WHERE n.nspname = '{FN_SCHEMA}'") == 1, "a second prepare changes nothing")

    q.check(q.move(["a"]) is None and held_names(q) == ["a"], "a DROP through the function quarantines the table",
            held_names(q))

    # The function's path is the one taken: a body that raises makes the move fail.
    q.su(f"CREATE OR REPLACE FUNCTION {FN_SCHEMA}.{fn}(arg jsonb) RETURNS void LANGUAGE plpgsql AS "
         f"$$ BEGIN RAISE EXCEPTION 'predrop quarantine: the function ran'; END $$")
    err = q.move(["b"])
    q.check(err is not None and "the function ran" in err, "the move calls the installed function", err)

    # A role that may not use the function's schema: the call says so and moves nothing (the proxy
    # then runs the DROP for real and moves inline from then on); the inline block moves.
    q.su(f"REVOKE USAGE ON SCHEMA {FN_SCHEMA} FROM PUBLIC")
    err = q.move(["b"])
    q.check(err is not None and "the move function is missing or out of reach" in err and held_names(q) == ["a"],
            "without USAGE on its schema the call refuses, and nothing moved", err)
    q.check(q.move(["b"], via_function=False) is None and held_names(q) == ["a", "b"],
            "the inline block moves it", held_names(q))
    q.check(q.value(q.sql_print("check")) is False, "the capture's check says the function is not for every role")
    q.su(f"GRANT USAGE ON SCHEMA {FN_SCHEMA} TO PUBLIC")
    q.check(q.value(q.sql_print("check")) is True, "and says it is once USAGE is back")

    # The function gone (a capture role without CREATE on the database never made it).
    q.su(f"DROP SCHEMA {FN_SCHEMA} CASCADE")
    err = q.move(["c"])
    q.check(err is not None and "the move function is missing or out of reach" in err,
            "without the function the call refuses", err)
    q.check(q.value(q.sql_print("check")) is False, "and the capture's check says so")
    q.check(q.move(["c"], via_function=False) is None and held_names(q) == ["a", "b", "c"],
            "the inline block moves it", held_names(q))

    # The prepare installs it again, and both paths record the same.
    q.run_sql(q.role("cap"), q.sql_print("prepare"))
    q.check(q.move(["d"]) is None and held_names(q) == ["a", "b", "c", "d"], "the function installed again is used",
            held_names(q))
    details = {h["detail"]["table"]: comparable(h["detail"]) for h in q.held()}
    q.check(len(details) == 4 and all(d == details["a"] for d in details.values()),
            "the function and the inline block record the same", details)

    for t in ("a", "c"):
        r = q.predrop("undrop", f"public.{t}")
        q.check(r.rc == 0 and q.value(f"SELECT count(*) FROM public.{t}") == 1,
                f"{t} (moved by the {'function' if t == 'a' else 'inline block'}) comes back whole", r)

    # Concurrent first DROPs in a new database prepare at once on several connections: each
    # prepare must succeed (before its advisory lock, the later ones failed on the schema's unique
    # index or with "tuple concurrently updated", and the capture logged it). Both schemas are gone
    # first, so every round starts from nothing; a barrier starts the four together.
    for rnd in range(5):
        q.su(f"DROP SCHEMA IF EXISTS {FN_SCHEMA} CASCADE; DROP SCHEMA IF EXISTS {qlib.QSCHEMA} CASCADE")
        conns = [q.connect(q.role("cap")) for _ in range(4)]
        errors, barrier = [], threading.Barrier(len(conns))

        def prepare(c):
            try:
                barrier.wait()
                with c.cursor() as cur:
                    cur.execute(q.sql_print("prepare"))
            except Exception as e:  # noqa: BLE001 (the test reports whatever the server said)
                errors.append(str(e).strip())
            finally:
                c.close()

        threads = [threading.Thread(target=prepare, args=(c,)) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        q.check(not errors, f"four prepares at once all succeed (round {rnd + 1})", errors)
        if errors:
            break
    q.check(q.value(q.sql_print("check")) is True, "and leave the function usable by every role")


if __name__ == "__main__":
    qlib.main(body, "movefn")
