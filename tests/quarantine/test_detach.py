"""A quarantined table yields (issue 22): what points outwards from it (triggers, rules, foreign
keys, checks and defaults that use an object left behind, grants to other roles, columns of types
left behind) is recorded in
the quarantine's comment and dropped by the move, as the server's DROP drops it, so that a later
DROP FUNCTION, DROP TABLE or DROP ROLE succeeds as it would direct; undrop puts each piece back,
and says which it could not. What uses only the table's own objects stays on it."""
from qlib import main


def undrop(q, name, *args):
    r = q.predrop("undrop", name, "--format", "json", *args)
    q.check(r.rc == 0, f"undrop {name} {' '.join(args)}", r)
    return r.json() if r.rc == 0 else {}


def pieces_on(q, rel):
    """What hangs on REL (a name or an oid): its user triggers, rules, checks and foreign keys,
    defaults, and grants to roles other than its owner."""
    oid = rel if isinstance(rel, int) else q.value(f"SELECT '{rel}'::regclass::oid")
    return {
        "triggers": q.value(f"SELECT count(*) FROM pg_trigger WHERE tgrelid = {oid} AND NOT tgisinternal"),
        "rules": q.value(f"SELECT count(*) FROM pg_rewrite WHERE ev_class = {oid} AND rulename <> '_RETURN'"),
        "constraints": q.value(f"SELECT string_agg(conname, ',' ORDER BY conname) FROM pg_constraint "
                               f"WHERE conrelid = {oid} AND contype IN ('f', 'c')"),
        "defaults": q.value(f"SELECT count(*) FROM pg_attrdef WHERE adrelid = {oid}"),
        "grantees": q.value(f"SELECT count(DISTINCT x.grantee) FROM pg_class c, aclexplode(c.relacl) x "
                            f"WHERE c.oid = {oid} AND x.grantee <> c.relowner"),
    }


# What the sales tables use: each of these a quarantined table would keep from being dropped.
OBJECTS = """
      CREATE TABLE public.provinces (id int PRIMARY KEY); INSERT INTO public.provinces SELECT generate_series(1, 5);
      CREATE TABLE public.audit (at timestamptz, what text);
      CREATE SEQUENCE public.shared_ids;
      CREATE FUNCTION public.stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.note := 'x'; RETURN NEW; END $$;
      CREATE FUNCTION public.positive(numeric) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > 0';
      CREATE FUNCTION public.region() RETURNS text LANGUAGE sql AS $$ SELECT 'north' $$;
"""

# Columns of types a quarantined table would keep from being dropped (an enum with a default and a
# check that use it, an array of it, domains, a composite, another table's row type), in a tree.
TYPED = """
      CREATE TYPE public.mood AS ENUM ('happy', 'sad', 'meh');
      CREATE DOMAIN public.pos AS int CHECK (VALUE > 0);
      CREATE DOMAIN public.good_mood AS public.mood CHECK (VALUE <> 'sad');
      CREATE TYPE public.pair AS (x int, y text);
      CREATE TABLE public.row_src (a int, b text);
      CREATE TABLE public.typed (id int PRIMARY KEY, m public.mood DEFAULT 'happy' CHECK (m <> 'meh'),
        ms public.mood[], p public.pos, g public.good_mood, pr public.pair, rs public.row_src, n numeric(8, 2))
        PARTITION BY RANGE (id);
      CREATE TABLE public.typed_1 PARTITION OF public.typed FOR VALUES FROM (0) TO (100);
      CREATE INDEX ON public.typed (m);
      INSERT INTO public.typed VALUES (1, 'sad', '{happy,sad}', 3, 'happy', ROW(1, 'a b'), ROW(2, 'two'), 1.5),
                                      (2, DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);"""


def test(q):
    owner, reader = q.role("owner"), q.role("reader")
    q.owner(f"""
{OBJECTS}      CREATE TABLE public.sales (
        id int PRIMARY KEY DEFAULT nextval('public.shared_ids'),
        own_id serial,
        province int CONSTRAINT sales_province_fk REFERENCES public.provinces (id),
        parent int CONSTRAINT sales_self_fk REFERENCES public.sales (id),
        amount numeric CONSTRAINT sales_amount_positive CHECK (public.positive(amount)),
        qty int CONSTRAINT sales_qty_sane CHECK (qty < 1000),
        region text DEFAULT public.region(),
        note text DEFAULT 'none');
      INSERT INTO public.sales (province, amount, qty) VALUES (1, 10, 1), (2, 20, 2);
      CREATE TRIGGER sales_stamp BEFORE INSERT ON public.sales FOR EACH ROW EXECUTE FUNCTION public.stamp();
      CREATE TRIGGER sales_stamp_off BEFORE UPDATE ON public.sales FOR EACH ROW EXECUTE FUNCTION public.stamp();
      ALTER TABLE public.sales DISABLE TRIGGER sales_stamp_off;
      CREATE RULE sales_log AS ON DELETE TO public.sales DO ALSO INSERT INTO public.audit VALUES (now(), 'delete');
      GRANT SELECT, INSERT ON public.sales TO "{reader}";
      GRANT UPDATE (note) ON public.sales TO "{reader}";""")
    before = pieces_on(q, "public.sales")
    oid = q.value("SELECT 'public.sales'::regclass::oid")

    err = q.move(["sales"])
    q.check(err is None, "the move commits", err)
    held = [h for h in q.held() if h["detail"]["table"] == "sales"]
    q.check(len(held) == 1, "sales is held", held)
    detached = sorted((p["kind"], p["name"]) for p in held[0]["detail"].get("detached", []))
    q.check(detached == [("check", "sales_amount_positive"), ("default", "id"), ("default", "region"),
                         ("foreign_key", "sales_province_fk"), ("grant", reader), ("rule", "sales_log"),
                         ("trigger", "sales_stamp"), ("trigger", "sales_stamp_off")],
            "the pieces pointing outwards are recorded; the self-reference, the plain check, the owned "
            "sequence's default and the constant default are not", detached)
    now = pieces_on(q, oid)
    q.check(now == {"triggers": 0, "rules": 0, "constraints": "sales_qty_sane,sales_self_fk", "defaults": 2,
                    "grantees": 0},
            "and dropped from the quarantined table; what uses only its own objects stays", now)

    # What the server's DROP would have let go now goes: each of these fails while a quarantined
    # table still uses the object.
    q.su(f'REVOKE USAGE ON SCHEMA public FROM "{reader}"')  # the one other thing the role holds
    for sql in ("DROP FUNCTION public.stamp()", "DROP FUNCTION public.positive(numeric)",
                "DROP FUNCTION public.region()", "DROP SEQUENCE public.shared_ids", "DROP TABLE public.provinces",
                "DROP TABLE public.audit", f'DROP ROLE "{reader}"'):
        err = None
        try:
            q.su(sql)
        except Exception as e:  # noqa: BLE001
            err = e
        q.check(err is None, f"{sql} succeeds with sales in quarantine", err)

    # Undrop: what is still there comes back; what is gone is said plainly.
    q.su(f'CREATE ROLE "{reader}" LOGIN; GRANT USAGE ON SCHEMA public TO "{reader}"')
    r = undrop(q, "public.sales")
    made = sorted((x["kind"], x["name"]) for x in r.get("dependents_recreated", []))
    missing = sorted((x["kind"], x["name"].rsplit(".", 1)[-1]) for x in r.get("not_restored", []))
    q.check(made == [("grant", reader)], "undrop gives the grants again (the role exists again)", r)
    q.check(("trigger", "sales_stamp") in missing and ("foreign_key", "sales_province_fk") in missing
            and ("rule", "sales_log") in missing and ("default", "region") in missing,
            "and reports each piece whose object is gone", missing)

    # The round trip with every object still there: undrop puts every piece back as it was.
    q.owner(f"""
      DROP TABLE public.sales;
{OBJECTS}      CREATE TABLE public.sales (
        id int PRIMARY KEY DEFAULT nextval('public.shared_ids'),
        province int CONSTRAINT sales_province_fk REFERENCES public.provinces (id),
        amount numeric CONSTRAINT sales_amount_positive CHECK (public.positive(amount)),
        region text DEFAULT public.region(), note text);
      CREATE TRIGGER sales_stamp BEFORE INSERT ON public.sales FOR EACH ROW EXECUTE FUNCTION public.stamp();
      CREATE TRIGGER sales_stamp_off BEFORE UPDATE ON public.sales FOR EACH ROW EXECUTE FUNCTION public.stamp();
      ALTER TABLE public.sales DISABLE TRIGGER sales_stamp_off;
      CREATE RULE sales_log AS ON DELETE TO public.sales DO ALSO INSERT INTO public.audit VALUES (now(), 'delete');""")
    q.owner(f'GRANT SELECT, INSERT ON public.sales TO "{reader}"; GRANT UPDATE (note) ON public.sales TO "{reader}"')
    before = pieces_on(q, "public.sales")
    defs = q.value("SELECT string_agg(pg_get_triggerdef(oid) || tgenabled::text, ' ' ORDER BY tgname) FROM pg_trigger "
                   "WHERE tgrelid = 'public.sales'::regclass AND NOT tgisinternal")
    acl = q.value("SELECT relacl::text || coalesce((SELECT string_agg(attacl::text, '') FROM pg_attribute "
                  "WHERE attrelid = 'public.sales'::regclass AND attacl IS NOT NULL), '') FROM pg_class "
                  "WHERE oid = 'public.sales'::regclass")
    err = q.move(["sales"])
    q.check(err is None, "the move commits", err)
    r = undrop(q, "public.sales")
    q.check(r.get("not_restored") == [], "undrop restores every piece", r)
    q.check(pieces_on(q, "public.sales") == before, "triggers, rule, constraints, defaults and grants are back",
            (pieces_on(q, "public.sales"), before))
    q.check(q.value("SELECT string_agg(pg_get_triggerdef(oid) || tgenabled::text, ' ' ORDER BY tgname) FROM pg_trigger "
                    "WHERE tgrelid = 'public.sales'::regclass AND NOT tgisinternal") == defs,
            "the triggers are the same, the disabled one disabled", defs)
    q.check(q.value("SELECT relacl::text || coalesce((SELECT string_agg(attacl::text, '') FROM pg_attribute "
                    "WHERE attrelid = 'public.sales'::regclass AND attacl IS NOT NULL), '') FROM pg_class "
                    "WHERE oid = 'public.sales'::regclass") == acl, "the table and column grants are the same", acl)
    q.owner("INSERT INTO public.sales (province, amount) VALUES (1, 5)")
    q.check(q.value("SELECT note || region FROM public.sales") == "xnorth", "the trigger and the default work again")

    # Undrop under another name: the pieces of the table follow it there.
    err = q.move(["sales"])
    q.check(err is None, "moved again", err)
    r = undrop(q, "public.sales", "--as", "sales_back")
    q.check(r.get("not_restored") == [] and pieces_on(q, "public.sales_back") == before,
            "restored as sales_back with every piece on it", (r, pieces_on(q, "public.sales_back")))

    # A partition: its foreign key cloned from the parent is dropped with it, and comes back with
    # the ATTACH rather than twice.
    q.owner("""
      CREATE TABLE public.events (id int, province int REFERENCES public.provinces (id), at date NOT NULL)
        PARTITION BY RANGE (at);
      CREATE TABLE public.events_2025 PARTITION OF public.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
      CREATE TRIGGER events_stamp BEFORE INSERT ON public.events FOR EACH ROW EXECUTE FUNCTION public.stamp();""")
    fks = q.value("SELECT count(*) FROM pg_constraint WHERE conrelid = 'public.events_2025'::regclass AND contype = 'f'")
    poid = q.value("SELECT 'public.events_2025'::regclass::oid")
    err = q.move(["events_2025"])
    q.check(err is None, "a partition moves", err)
    q.check(pieces_on(q, poid)["constraints"] is None and pieces_on(q, poid)["triggers"] == 0,
            "its cloned foreign key and trigger are gone from it", pieces_on(q, poid))
    r = undrop(q, "public.events_2025")
    q.check(r.get("attached_to") == "public.events" and r.get("not_restored") == [], "undrop attaches it again", r)
    q.check(q.value("SELECT count(*) FROM pg_constraint WHERE conrelid = 'public.events_2025'::regclass "
                    "AND contype = 'f'") == fks and
            q.value("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.events_2025'::regclass "
                    "AND NOT tgisinternal") == 1,
            "with one foreign key and one trigger, cloned from the parent again")

    # Columns of types that stay behind: an enum (with a default and a check that use it), an array
    # of it, domains (over a built-in type, over the enum), a composite, another table's row type, a
    # partitioned tree. In quarantine they hold the values as text (the domain over int as int), so
    # that the types can be dropped; undrop casts them back, values and all.
    q.owner(TYPED)
    shape = ("SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
             "FROM pg_attribute WHERE attrelid = '{}'::regclass AND attnum > 0 AND NOT attisdropped")
    rows = "SELECT string_agg(t::text, ' ' ORDER BY id) FROM public.typed t"
    typed_before, typed_shape, part_shape = q.value(rows), q.value(shape.format("public.typed")), \
        q.value(shape.format("public.typed_1"))
    toid = q.value("SELECT 'public.typed'::regclass::oid")
    err = q.move(["typed"])
    q.check(err is None, "a table with columns of user types moves", err)
    d = [h for h in q.held() if h["detail"]["table"] == "typed"][0]["detail"]
    kinds = sorted((x["kind"], x["name"]) for x in d.get("detached", []))
    q.check(kinds == [("check", "typed_m_check"), ("column_type", "g"), ("column_type", "m"), ("column_type", "ms"),
                      ("column_type", "p"), ("column_type", "pr"), ("column_type", "rs"), ("default", "m"),
                      ("default", "m")],
            "the move records each column's type, and the default (the partition's too) and check that use the enum",
            kinds)
    held_shape = q.value(f"SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
                         f"FROM pg_attribute WHERE attrelid = {toid} AND attnum > 0 AND NOT attisdropped")
    q.check(held_shape == "id integer, m text, ms text[], p integer, g text, pr text, rs text, n numeric(8,2)",
            "in quarantine the columns hold text (the domain over int its int)", held_shape)
    q.owner("DROP DOMAIN public.good_mood; DROP TYPE public.mood; DROP DOMAIN public.pos; DROP TYPE public.pair; "
            "DROP TABLE public.row_src")
    q.check(True, "DROP TYPE, DROP DOMAIN and DROP TABLE of the row type succeed with the table in quarantine")
    r = undrop(q, "public.typed")
    missing = sorted(x["name"].rsplit(".", 1)[-1] for x in r.get("not_restored", []))
    q.check(missing == ["g", "m", "m", "m", "ms", "p", "pr", "rs", "typed_m_check"],
            "undrop with the types gone: the columns stay text; each, the default and the check reported", r)
    q.check(q.value("SELECT m || ms::text || p FROM public.typed WHERE id = 1") == "sad{happy,sad}3",
            "and the values are there", q.value("SELECT m || ms::text || p FROM public.typed WHERE id = 1"))
    q.owner("DROP TABLE public.typed;" + TYPED)
    err = q.move(["typed"])
    q.check(err is None, "moved again", err)
    r = undrop(q, "public.typed")
    q.check(r.get("not_restored") == [], "undrop with the types there restores every column", r)
    q.check(q.value(shape.format("public.typed")) == typed_shape and q.value(shape.format("public.typed_1")) == part_shape,
            "the columns have their types again, in the partitions too", q.value(shape.format("public.typed")))
    q.check(q.value(rows) == typed_before, "the rows are the same", (q.value(rows), typed_before))
    q.check(pieces_on(q, "public.typed")["defaults"] == 1 and
            pieces_on(q, "public.typed")["constraints"] == "typed_m_check", "the default and the check are back",
            pieces_on(q, "public.typed"))

    # Row security policies, extended statistics, an index on a collation, a publication, a typed
    # table: let go at the move (the table's own policy naming its columns stays a policy of it
    # until then), each back after undrop.
    q.su(f'GRANT CREATE ON DATABASE "{q.db}" TO "{owner}"')
    q.owner(f"""
      CREATE TABLE public.lookup (a int);
      CREATE TYPE public.pair2 AS (a int, b int);
      CREATE TABLE public.guarded OF public.pair2;
      ALTER TABLE public.guarded ENABLE ROW LEVEL SECURITY;
      CREATE POLICY guarded_p ON public.guarded AS RESTRICTIVE FOR SELECT TO "{reader}"
        USING (a IN (SELECT a FROM public.lookup)) ;
      CREATE STATISTICS public.guarded_ab ON a, b FROM public.guarded;
      ALTER STATISTICS public.guarded_ab SET STATISTICS 50;
      CREATE COLLATION public.c_coll (locale = 'C');
      CREATE INDEX guarded_b ON public.guarded ((b::text) COLLATE public.c_coll);
      CREATE PUBLICATION guarded_pub FOR TABLE public.guarded (a) WHERE (a > 0);
      INSERT INTO public.guarded VALUES (1, 2);""")
    probe = ("SELECT (SELECT string_agg(polname || polpermissive::text || polcmd::text || pg_get_expr(polqual, polrelid), ',')"
             "        FROM pg_policy WHERE polrelid = '{0}'::regclass),"
             " (SELECT string_agg(pg_get_statisticsobjdef(oid) || stxstattarget::text, ',') FROM pg_statistic_ext"
             "   WHERE stxrelid = '{0}'::regclass),"
             " (SELECT string_agg(pg_get_indexdef(indexrelid), ',') FROM pg_index WHERE indrelid = '{0}'::regclass),"
             " (SELECT string_agg(pubname || coalesce(array_to_string(attnames, ' '), '') || coalesce(rowfilter, ''), ',')"
             "   FROM pg_publication_tables WHERE schemaname = 'public' AND tablename = '{1}'),"
             " (SELECT reloftype::regtype::text FROM pg_class WHERE oid = '{0}'::regclass)")
    before = q.run_sql("postgres", probe.format("public.guarded", "guarded"))[0]
    err = q.move(["guarded"])
    q.check(err is None, "a typed table with a policy, statistics, an index on a collation and a publication moves", err)
    q.su("DROP TABLE public.lookup; DROP COLLATION public.c_coll")
    q.check(q.value("SELECT count(*) FROM pg_statistic_ext WHERE stxname = 'guarded_ab'") == 0 and
            q.value("SELECT count(*) FROM pg_publication_rel") == 0,
            "its statistics object and publication membership went with it; the table and collation it used can go")
    q.owner("DROP TYPE public.pair2")
    q.su("CREATE TABLE public.lookup (a int); CREATE COLLATION public.c_coll (locale = 'C')")
    q.owner("CREATE TYPE public.pair2 AS (a int, b int)")
    q.su(f'ALTER TABLE public.lookup OWNER TO "{owner}"; ALTER COLLATION public.c_coll OWNER TO "{owner}"')
    r = undrop(q, "public.guarded")
    q.check(r.get("not_restored") == [], "undrop restores every piece", r)
    after = q.run_sql("postgres", probe.format("public.guarded", "guarded"))[0]
    q.check(after == before, "policy, statistics (with its target), index, publication (columns, row filter) and "
            "type are as they were", (before, after))

    # The owner: a session that may give the table to the quarantine's owner (here a superuser's)
    # does, so the owner can be dropped; undrop gives it back, or says the role is gone.
    cap = q.role("cap")
    leaver = f"{q.db}_leaver"
    q.su(f'DROP ROLE IF EXISTS "{leaver}"; CREATE ROLE "{leaver}"; GRANT CREATE ON SCHEMA public TO "{leaver}"; '
         f'GRANT "{leaver}" TO "{cap}"; CREATE TABLE public.left_behind (a int); '
         f'ALTER TABLE public.left_behind OWNER TO "{leaver}"')
    loid = q.value("SELECT 'public.left_behind'::regclass::oid")
    err = q.move(["left_behind"], user="postgres")
    q.check(err is None, "a superuser's DROP of a table another role owns moves it", err)
    q.check(q.value(f"SELECT relowner::regrole::text FROM pg_class WHERE oid = {loid}").strip('"') == cap,
            "the quarantined table now belongs to the quarantine's owner",
            q.value(f"SELECT relowner::regrole::text FROM pg_class WHERE oid = {loid}"))
    d = [h for h in q.held() if h["detail"]["table"] == "left_behind"][0]["detail"]
    q.check(d.get("owner_was", "").strip('"') == leaver, "and its comment says whose it was", d.get("owner_was"))
    r = undrop(q, "public.left_behind")
    q.check(q.value("SELECT relowner::regrole::text FROM pg_class WHERE oid = 'public.left_behind'::regclass")
            .strip('"') == leaver and {"kind": "owner", "name": d.get("owner_was")} in r.get("restored", []),
            "undrop gives it back to its owner", r)
    err = q.move(["left_behind"], user="postgres")
    q.check(err is None, "moved again", err)
    q.su(f'REVOKE CREATE ON SCHEMA public FROM "{leaver}"; DROP ROLE "{leaver}"')
    q.check(q.value(f"SELECT count(*) FROM pg_roles WHERE rolname = '{leaver}'") == 0,
            "DROP ROLE of its owner succeeds with the table in quarantine")
    r = undrop(q, "public.left_behind")
    q.check([x["kind"] for x in r.get("not_restored", [])] == ["owner"] and
            q.value("SELECT relowner::regrole::text FROM pg_class WHERE oid = 'public.left_behind'::regclass")
            .strip('"') == cap, "undrop restores the table and says its owner is gone", r)
    q.check(q.value("SELECT relowner::regrole::text FROM pg_class WHERE oid = 'public.sales_back'::regclass").strip('"')
            == owner, "a table moved by its owner's own session keeps its owner")


if __name__ == "__main__":
    main(test, "detach")
