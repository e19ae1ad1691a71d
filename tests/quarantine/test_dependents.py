"""What a quarantined DROP takes along (issue 16): with CASCADE, dependent views (and views on
those), materialized views and other tables' foreign keys are recorded and dropped, and undrop
recreates them (reporting those whose other tables are gone); a partition is detached first and
attached again on undrop; a partitioned table moves with all its partitions; DROP SCHEMA moves
every table of the schema; what the move cannot keep raises "predrop quarantine: "."""
import psycopg2

from qlib import main


def undrop(q, name, *args):
    r = q.predrop("undrop", name, "--format", "json", *args)
    q.check(r.rc == 0, f"undrop {name} {' '.join(args)}", r)
    return r.json() if r.rc == 0 else {}


def test(q):
    owner, reader = q.role("owner"), q.role("reader")
    q.owner(f"""
      CREATE TABLE public.parent (id int PRIMARY KEY, name text);
      INSERT INTO public.parent SELECT g, 'p' || g FROM generate_series(1, 10) g;
      CREATE TABLE public.child (id int PRIMARY KEY, parent_id int CONSTRAINT child_parent_fk REFERENCES public.parent (id));
      INSERT INTO public.child VALUES (1, 1), (2, 2);
      CREATE TABLE public.other (id int PRIMARY KEY);
      INSERT INTO public.other VALUES (1);
      CREATE VIEW public.parent_names WITH (security_barrier) AS SELECT id, name FROM public.parent;
      CREATE VIEW public.parent_names_2 AS SELECT name FROM public.parent_names WHERE id < 5;
      CREATE VIEW public.both_v AS SELECT p.id FROM public.parent p JOIN public.other o USING (id);
      CREATE MATERIALIZED VIEW public.parent_mv AS SELECT id FROM public.parent;
      CREATE UNIQUE INDEX parent_mv_id ON public.parent_mv (id);
      GRANT SELECT ON public.parent_names TO "{reader}";
      COMMENT ON VIEW public.parent_names IS 'names';""")

    err = q.move(["parent"])
    q.check(err is not None and err.startswith("ERROR:  predrop quarantine: "),
            "without CASCADE the block refuses a table with dependents", err)
    q.check(q.held() == [], "and moves nothing")

    err = q.move(["parent"], "--cascade")
    q.check(err is None, "with CASCADE the move commits", err)
    gone = q.value("SELECT count(*) FROM pg_class WHERE relname IN ('parent_names', 'parent_names_2', 'both_v', 'parent_mv')")
    q.check(gone == 0, "the dependent views and the materialized view are dropped", gone)
    q.check(q.value("SELECT count(*) FROM pg_constraint WHERE conname = 'child_parent_fk'") == 0,
            "the other table's foreign key is dropped")
    deps = q.held()[0]["detail"]["dependents"]
    kinds = sorted((d["kind"], d["name"]) for d in deps)
    q.check(kinds == [("foreign_key", "child_parent_fk"), ("materialized_view", "parent_mv"), ("view", "both_v"),
                      ("view", "parent_names"), ("view", "parent_names_2")], "all five are recorded", kinds)

    q.owner("DROP TABLE public.other")  # both_v cannot come back: one of its tables is gone
    r = undrop(q, "public.parent")
    made = sorted(x["name"] for x in r.get("dependents_recreated", []))
    q.check(made == ["child_parent_fk", "parent_mv", "parent_names", "parent_names_2"],
            "undrop recreates the views, the materialized view and the foreign key", r)
    q.check(any(x["name"] == "public.both_v" for x in r.get("not_restored", [])),
            "and reports the view whose other table is gone", r)
    q.check(q.value("SELECT count(*) FROM public.parent_names_2") == 4, "the view on the view reads the table again")
    q.check(q.value("SELECT count(*) FROM public.parent_mv") == 10 and
            q.value("SELECT count(*) FROM pg_indexes WHERE indexname = 'parent_mv_id'") == 1,
            "the materialized view is filled and has its index")
    q.check(q.value("SELECT count(*) FROM public.parent_names", user=reader) == 10,
            "the view's grant is back")
    q.check(q.value("SELECT obj_description('public.parent_names'::regclass, 'pg_class')") == "names" and
            q.value("SELECT relowner::regrole::text FROM pg_class WHERE relname = 'parent_names'") == f'"{owner}"'
            or q.value("SELECT relowner::regrole::text FROM pg_class WHERE relname = 'parent_names'") == owner,
            "the view's owner and comment are back")
    q.check(q.value("SELECT reloptions::text FROM pg_class WHERE relname = 'parent_names'") == "{security_barrier=true}",
            "the view's options are back")
    try:
        q.owner("INSERT INTO public.child VALUES (3, 99)")
        q.check(False, "the recreated foreign key is enforced")
    except psycopg2.Error as e:
        q.check(e.pgcode == "23503", "the recreated foreign key is enforced", e.pgerror)

    # DROP TABLE a, b where b references a: both move, the key travels with them.
    err = q.move(["parent", "child"], "--cascade")
    q.check(err is None, "DROP TABLE parent, child CASCADE moves both", err)
    held = {h["detail"]["table"]: h for h in q.held()}
    q.check(set(held) == {"parent", "child"}, "both held", list(held))
    q.check(not any(d["kind"] == "foreign_key" for d in held["parent"]["detail"]["dependents"]),
            "a foreign key between two moved tables is not a dependent")
    undrop(q, "public.parent")
    undrop(q, "public.child")
    q.check(q.value("SELECT count(*) FROM pg_constraint WHERE conname = 'child_parent_fk'") == 1,
            "the foreign key came back with the tables")

    # A partition: detached first, attached again by undrop.
    q.owner("""
      CREATE TABLE public.events (id int, at date NOT NULL, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
      CREATE TABLE public.events_2024 PARTITION OF public.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
      CREATE TABLE public.events_2025 PARTITION OF public.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
      INSERT INTO public.events VALUES (1, '2024-05-01'), (2, '2025-05-01'), (3, '2025-06-01');""")
    err = q.move(["events_2025"])
    q.check(err is None, "a partition moves", err)
    q.check(q.value("SELECT count(*) FROM public.events") == 1, "its rows no longer show through the parent")
    d = q.held()[0]["detail"]
    q.check(d["partition_of"] == {"parent": "public.events", "bound": "FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')"},
            "parent and bound recorded", d["partition_of"])
    r = undrop(q, "public.events_2025")
    q.check(r.get("attached_to") == "public.events" and q.value("SELECT count(*) FROM public.events") == 3,
            "undrop attaches it again", r)

    # A partitioned table moves with all its partitions and comes back with them.
    q.owner("COMMENT ON TABLE public.events_2024 IS 'old year'")
    err = q.move(["events"])
    q.check(err is None, "a partitioned table moves", err)
    held = q.held()
    q.check(len(held) == 1 and len(held[0]["detail"]["members"]) == 2 and
            q.value("SELECT count(*) FROM pg_class WHERE relname LIKE 'events%'") == 0,
            "with its two partitions, listed once", held)
    q.check(held[0]["bytes"] > 0, "its size counts its partitions", held[0]["bytes"])
    undrop(q, "public.events")
    q.check(q.value("SELECT count(*) FROM public.events") == 3 and
            q.value("SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.events'::regclass") == 2,
            "rows and partitions are back")
    q.check(q.value("SELECT obj_description('public.events_2024'::regclass, 'pg_class')") == "old year",
            "a partition's comment is back")
    q.check(q.value("SELECT count(*) FROM pg_indexes WHERE indexname IN ('events_pkey', 'events_2024_pkey', 'events_2025_pkey')") == 3,
            "the partitions' index names are back")

    # DROP SCHEMA: every table of it moves, partitions with their parent.
    q.su(f'CREATE SCHEMA app AUTHORIZATION "{owner}"')
    q.owner("""CREATE TABLE app.a (id int PRIMARY KEY); CREATE TABLE app.b (id int REFERENCES app.a);
               CREATE TABLE app.p (id int) PARTITION BY LIST (id); CREATE TABLE app.p1 PARTITION OF app.p FOR VALUES IN (1);
               CREATE VIEW app.av AS SELECT * FROM app.a;""")
    err = q.move([], "--schema-drop", "app", "--cascade")
    q.check(err is None, "DROP SCHEMA's move commits", err)
    names = sorted(h["detail"]["table"] for h in q.held())
    q.check(names == ["a", "b", "p"], "every table of the schema is held, the partition with its parent", names)

    # What the move cannot keep: raises, and the transaction keeps the table.
    q.owner("CREATE TABLE public.base (id int); CREATE TABLE public.heir () INHERITS (public.base)")
    err = q.move(["heir"])
    q.check(err is not None and "predrop quarantine: " in err and "inherit" in err, "an inheritance child raises", err)
    q.owner("CREATE TABLE public.big AS SELECT g FROM generate_series(1, 10000) g")
    err = q.move(["big"], "--max-bytes", "8192")
    q.check(err is not None and "max_bytes" in err, "a table larger than max_bytes raises", err)
    q.check(q.value("SELECT to_regclass('public.big') IS NOT NULL"), "and stays where it was")
    q.owner("CREATE TABLE public.rt (id int)")
    err = q.move(["nosuch", "--real", "rt"])
    q.check(err is None and q.value("SELECT to_regclass('public.rt') IS NULL")
            and not any(h["detail"]["table"] == "rt" for h in q.held()),
            "a missing name is skipped; a table no rule quarantines is dropped for real", err)
    q.su(f'REVOKE CREATE ON SCHEMA predrop_quarantine FROM PUBLIC')
    err = q.move(["big"])
    q.check(err is not None and "has no CREATE on schema" in err, "no CREATE on the quarantine schema raises", err)


if __name__ == "__main__":
    main(test, "dependents")
