#include "quarantine/move_sql.hpp"

#include <nlohmann/json.hpp>
#include <cstdio>
#include <mutex>
#include <set>
#include <stdexcept>

#include "capture/snapshot.hpp"

namespace predrop::quarantine {

namespace {

// Where the move's function lives (prepare_sql).
constexpr const char* kMoveFunctionSchema = "predrop_quarantine_move";

// The block's body is dollar-quoted $predrop_q$ and its argument $predrop_a$: no name may carry
// either tag (nor anything starting with it), so the literal cannot end early whatever the
// session's standard_conforming_strings.
void check_tag_free(std::string_view s) {
  if (s.find("$predrop") != std::string_view::npos)
    throw std::invalid_argument("predrop quarantine: a name contains \"$predrop\"");
}

// The per-relation work, shared by a quarantined table and the partitions that move with it.
// The body of the move: installed once per database as a function (prepare_sql), whose
// statements' plans the server keeps per session, and run inline as a DO block where the function
// is missing (a capture role without CREATE on the database). Its argument is `arg` either way.
constexpr const char* kMoveBody = R"SQL(
DECLARE
  qs text := arg->>'quarantine_schema';
  qs_oid oid;
  qs_owner oid;
  can_give boolean;   -- the session may give a table to the quarantine's owner
  do_cascade boolean := coalesce((arg->>'cascade')::boolean, false);
  max_bytes bigint := coalesce((arg->>'max_bytes')::bigint, 0);
  hold_id text := nullif(arg->>'hold', '');
  ts bigint := floor(extract(epoch FROM clock_timestamp()))::bigint;
  dropped_at text := to_char(to_timestamp(ts) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
  saved_path text := current_setting('search_path');
  saved_cmm text := current_setting('client_min_messages');
  t jsonb;
  s text;
  r oid;
  m oid;
  v oid;
  x oid;
  targets oid[] := '{}';
  real_drops oid[] := '{}';
  moved oid[] := '{}';
  tree oid[];
  frontier oid[];
  next_frontier oid[];
  views oid[];
  fks oid[];
  d record;
  q_id uuid;
  qname text;
  total bigint;
  detail jsonb;
  members jsonb;
  deps jsonb;
  partition_of jsonb;
  def text;
  con record;
  inherited oid[] := '{}';
  detached jsonb;
  may_point_out boolean;
BEGIN
  SELECT oid, nspowner, pg_has_role(nspowner, 'USAGE') INTO qs_oid, qs_owner, can_give FROM pg_namespace WHERE nspname = qs;
  IF qs_oid IS NULL THEN
    RAISE EXCEPTION 'predrop quarantine: schema % does not exist', quote_ident(qs);
  END IF;
  IF NOT has_schema_privilege(qs_oid, 'CREATE') THEN
    RAISE EXCEPTION 'predrop quarantine: role % has no CREATE on schema %', current_user, quote_ident(qs);
  END IF;

  -- Names resolve as the client's statement resolved them: with its search_path, before ours.
  FOR t IN SELECT * FROM jsonb_array_elements(arg->'tables') LOOP
    r := to_regclass(CASE WHEN coalesce(t->>'schema', '') = '' THEN quote_ident(t->>'table')
                          ELSE quote_ident(t->>'schema') || '.' || quote_ident(t->>'table') END);
    CONTINUE WHEN r IS NULL OR r = ANY(targets) OR r = ANY(real_drops);
    IF NOT coalesce((t->>'quarantine')::boolean, true)
       OR (SELECT relpersistence = 't' FROM pg_class WHERE oid = r) THEN
      real_drops := real_drops || r;
    ELSE
      targets := targets || r;
    END IF;
  END LOOP;
  FOR s IN SELECT * FROM jsonb_array_elements_text(arg->'schemas') LOOP
    targets := targets || ARRAY(
      SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = s AND c.relkind IN ('r', 'p') AND NOT (c.oid = ANY(targets))
        AND NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
                        WHERE c.relispartition AND i.inhrelid = c.oid AND p.relnamespace = c.relnamespace)
      ORDER BY c.oid);
  END LOOP;
  -- A partition named beside its (also named) parent moves with the parent.
  targets := ARRAY(SELECT u.x FROM unnest(targets) WITH ORDINALITY u(x, o)
                   WHERE NOT EXISTS (SELECT 1 FROM pg_partition_ancestors(u.x) a
                                     WHERE a.relid::oid <> u.x AND a.relid::oid = ANY(targets))
                   ORDER BY u.o);
  FOREACH r IN ARRAY targets LOOP
    -- pg_partition_tree lists nothing for a table that is neither partitioned nor a partition.
    moved := moved || r || ARRAY(SELECT relid::oid FROM pg_partition_tree(r) WHERE relid::oid <> r);
  END LOOP;

  -- Definitions are deparsed fully qualified; the cascades' notices are the real DROP's, already sent.
  PERFORM set_config('search_path', 'pg_catalog', true);
  PERFORM set_config('client_min_messages', 'warning', true);

  FOREACH r IN ARRAY targets LOOP
    tree := ARRAY[r] || ARRAY(SELECT relid::oid FROM pg_partition_tree(r) WHERE relid::oid <> r ORDER BY level, relid::oid);
    FOREACH m IN ARRAY tree LOOP
      SELECT i.inhparent::regclass::text AS parent INTO d FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhrelid = m AND NOT c.relispartition LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'predrop quarantine: % inherits from % (inheritance is not kept)', m::regclass, d.parent;
      END IF;
      SELECT i.inhrelid::regclass::text AS child INTO d FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = m AND NOT c.relispartition LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'predrop quarantine: % has inheritance child % (inheritance is not kept)', m::regclass, d.child;
      END IF;
    END LOOP;
    IF max_bytes > 0 THEN
      SELECT sum(pg_total_relation_size(u.x))::bigint INTO total FROM unnest(tree) u(x);
      IF total > max_bytes THEN
        RAISE EXCEPTION 'predrop quarantine: % is % bytes, more than quarantine.max_bytes (%)', r::regclass, total, max_bytes;
      END IF;
    END IF;

    -- What the server's DROP takes along: views and materialized views reading the table (and
    -- views on those), foreign keys of other tables. Anything else cannot be kept.
    views := '{}';
    fks := '{}';
    frontier := tree;
    WHILE cardinality(frontier) > 0 LOOP
      next_frontier := '{}';
      -- Two index scans of pg_depend (by the relations, by their row and array types): one OR of
      -- both read the whole of pg_depend, which grows with the database. The types are probed by
      -- OID, one relation at a time (the lateral's OFFSET 0 keeps it so): with `c.oid =
      -- ANY(frontier)` the generic plan read all of pg_class and pg_type at every move, dead rows
      -- included, a third of the move's time in a recreate churn (issue 21: 0.78 of 2.44 ms).
      FOR d IN
        SELECT dep.classid, dep.objid FROM pg_depend dep
        WHERE dep.refclassid = 'pg_class'::regclass AND dep.refobjid = ANY(frontier) AND dep.deptype = 'n'
          AND NOT (dep.classid = 'pg_class'::regclass AND dep.objid = ANY(moved))
        UNION
        SELECT dep.classid, dep.objid FROM pg_depend dep
        WHERE dep.refclassid = 'pg_type'::regclass AND dep.deptype = 'n'
          AND dep.refobjid = ANY(ARRAY(
                SELECT ty.x FROM unnest(frontier) f(o)
                CROSS JOIN LATERAL (SELECT c.reltype FROM pg_class c WHERE c.oid = f.o OFFSET 0) c
                CROSS JOIN LATERAL (VALUES (c.reltype), ((SELECT t.typarray FROM pg_type t WHERE t.oid = c.reltype))) ty(x)))
          AND NOT (dep.classid = 'pg_class'::regclass AND dep.objid = ANY(moved))
        ORDER BY 1, 2
      LOOP
        -- What belongs to a moved table itself (its policies, triggers, defaults, statistics
        -- objects, publication row filters, whose expressions name its columns) moves with it.
        CONTINUE WHEN (d.classid = 'pg_policy'::regclass
                        AND (SELECT polrelid FROM pg_policy WHERE oid = d.objid) = ANY(moved))
                   OR (d.classid = 'pg_trigger'::regclass
                        AND (SELECT tgrelid FROM pg_trigger WHERE oid = d.objid) = ANY(moved))
                   OR (d.classid = 'pg_attrdef'::regclass
                        AND (SELECT adrelid FROM pg_attrdef WHERE oid = d.objid) = ANY(moved))
                   OR (d.classid = 'pg_statistic_ext'::regclass
                        AND (SELECT stxrelid FROM pg_statistic_ext WHERE oid = d.objid) = ANY(moved))
                   OR (d.classid = 'pg_publication_rel'::regclass
                        AND (SELECT prrelid FROM pg_publication_rel WHERE oid = d.objid) = ANY(moved));
        IF d.classid = 'pg_rewrite'::regclass THEN
          SELECT ev_class INTO v FROM pg_rewrite WHERE oid = d.objid;
          CONTINUE WHEN v = ANY(views) OR v = ANY(moved) OR v = ANY(frontier);
          IF (SELECT relkind FROM pg_class WHERE oid = v) NOT IN ('v', 'm') THEN
            RAISE EXCEPTION 'predrop quarantine: % depends on % (only views, materialized views and foreign keys are kept)',
              pg_describe_object(d.classid, d.objid, 0), r::regclass;
          END IF;
          views := views || v;
          next_frontier := next_frontier || v;
        ELSIF d.classid = 'pg_constraint'::regclass THEN
          SELECT * INTO con FROM pg_constraint WHERE oid = d.objid;
          CONTINUE WHEN con.conrelid = ANY(moved) OR con.conparentid <> 0 OR d.objid = ANY(fks);
          IF con.contype <> 'f' THEN
            RAISE EXCEPTION 'predrop quarantine: % depends on % (only views, materialized views and foreign keys are kept)',
              pg_describe_object(d.classid, d.objid, 0), r::regclass;
          END IF;
          fks := fks || d.objid;
        ELSE
          RAISE EXCEPTION 'predrop quarantine: % depends on % (only views, materialized views and foreign keys are kept)',
            pg_describe_object(d.classid, d.objid, 0), r::regclass;
        END IF;
      END LOOP;
      frontier := next_frontier;
    END LOOP;
    IF NOT do_cascade AND (cardinality(views) > 0 OR cardinality(fks) > 0) THEN
      RAISE EXCEPTION 'predrop quarantine: % has dependents and the statement has no CASCADE', r::regclass;
    END IF;

    deps := '[]';
    FOREACH v IN ARRAY views LOOP
      SELECT c.relkind, c.relname, n.nspname, c.relowner::regrole::text AS owner, c.reloptions, c.relacl,
             (SELECT ds.description FROM pg_description ds
               WHERE ds.objoid = c.oid AND ds.classoid = 'pg_class'::regclass AND ds.objsubid = 0) AS comment
        INTO d FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = v;
      def := format('CREATE %s %s%s AS %s;', CASE d.relkind WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'VIEW' END,
                    v::regclass,
                    CASE WHEN d.reloptions IS NULL THEN '' ELSE ' WITH (' || array_to_string(d.reloptions, ', ') || ')' END,
                    rtrim(btrim(pg_get_viewdef(v)), ';'));
      def := def || format(' ALTER %s %s OWNER TO %s;', CASE d.relkind WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'VIEW' END,
                           v::regclass, d.owner);
      IF d.relkind = 'm' THEN
        def := def || coalesce((SELECT string_agg(' ' || pg_get_indexdef(i.indexrelid) || ';', '' ORDER BY i.indexrelid)
                                FROM pg_index i WHERE i.indrelid = v), '');
      END IF;
      def := def || coalesce((
        SELECT string_agg(format(' GRANT %s ON %s TO %s%s;', a.privilege_type, v::regclass,
                                 CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
                                 CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END), '')
        FROM aclexplode(d.relacl) a WHERE a.grantee <> (SELECT relowner FROM pg_class WHERE oid = v)), '');
      IF d.comment IS NOT NULL THEN
        def := def || format(' COMMENT ON %s %s IS %L;', CASE d.relkind WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'VIEW' END,
                             v::regclass, d.comment);
      END IF;
      deps := deps || jsonb_build_object('kind', CASE d.relkind WHEN 'm' THEN 'materialized_view' ELSE 'view' END,
                                         'name', d.relname, 'schema', d.nspname, 'table', NULL, 'definition', def);
    END LOOP;
    FOREACH x IN ARRAY fks LOOP
      SELECT c.conname, c.conrelid, n.nspname, t2.relname INTO d FROM pg_constraint c
        JOIN pg_class t2 ON t2.oid = c.conrelid JOIN pg_namespace n ON n.oid = t2.relnamespace WHERE c.oid = x;
      deps := deps || jsonb_build_object('kind', 'foreign_key', 'name', d.conname, 'schema', d.nspname,
                                         'table', d.relname,
                                         'definition', format('ALTER TABLE %s ADD CONSTRAINT %I %s;', d.conrelid::regclass,
                                                              d.conname, pg_get_constraintdef(x)));
    END LOOP;

    partition_of := NULL;
    IF (SELECT relispartition FROM pg_class WHERE oid = r) THEN
      SELECT jsonb_build_object('parent', i.inhparent::regclass::text, 'bound', pg_get_expr(c.relpartbound, c.oid)) INTO partition_of
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhrelid = r;
    END IF;

    q_id := gen_random_uuid();
    members := '[]';
    detail := NULL;
    may_point_out := false;
    inherited := '{}';
    FOREACH m IN ARRAY tree LOOP
      -- The comment read as obj_description reads it, without calling it: a SQL function's body
      -- is planned afresh at every call, 0.17 of this statement's 0.33 ms (issue 21).
      SELECT c.relname, n.nspname,
             (SELECT ds.description FROM pg_description ds
               WHERE ds.objoid = c.oid AND ds.classoid = 'pg_class'::regclass AND ds.objsubid = 0) AS comment,
             CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound,
             c.relhastriggers OR c.relhasrules OR c.relchecks > 0 OR c.relacl IS NOT NULL
               OR EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
                            AND (a.atthasdef OR a.attacl IS NOT NULL))
               -- A column of a type that is not built in (only those have a pg_depend row).
               OR EXISTS (SELECT 1 FROM pg_depend ct WHERE ct.classid = 'pg_class'::regclass AND ct.objid = c.oid
                            AND ct.objsubid > 0 AND ct.refclassid IN ('pg_type'::regclass, 'pg_collation'::regclass)
                            AND ct.deptype = 'n')
               -- A typed table, policies, extended statistics, publications, an index on anything not
               -- built in (an operator class, a collation, a function, a type).
               OR c.reloftype <> 0
               OR EXISTS (SELECT 1 FROM pg_policy po WHERE po.polrelid = c.oid)
               OR EXISTS (SELECT 1 FROM pg_statistic_ext se WHERE se.stxrelid = c.oid)
               OR EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prrelid = c.oid)
               OR EXISTS (SELECT 1 FROM pg_index ix JOIN pg_depend id ON id.classid = 'pg_class'::regclass
                            AND id.objid = ix.indexrelid AND id.deptype = 'n' AND id.refclassid <> 'pg_class'::regclass
                          WHERE ix.indrelid = c.oid) AS may_point_out,
             CASE WHEN can_give AND c.relowner <> qs_owner THEN c.relowner::regrole::text END AS owner_was
        INTO d FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = m;
      may_point_out := may_point_out OR d.may_point_out;
      qname := 'q' || m || '_' || ts || '_' || d.relname;
      WHILE octet_length(qname) > 63 LOOP qname := left(qname, -1); END LOOP;
      t := jsonb_build_object('oid', m::bigint, 'schema', d.nspname, 'table', d.relname, 'comment', d.comment,
                              'quarantine_table', qname, 'owner_was', d.owner_was);
      IF m = r THEN
        detail := jsonb_build_object(
          'predrop_quarantine', 1, 'id', q_id, 'schema', d.nspname, 'table', d.relname, 'oid', r::bigint,
          'dropped_at', dropped_at, 'dropped_by', session_user::text, 'comment', d.comment,
          'quarantine_table', qname, 'owner_was', d.owner_was, 'partition_of', partition_of,
          'dependents', deps, 'hold', hold_id);
      ELSE
        members := members || (t || jsonb_build_object('bound', d.bound));
      END IF;
    END LOOP;

    -- Dependents go first (what the server's CASCADE drops), then the partition is detached.
    FOR i IN REVERSE cardinality(views)..1 LOOP
      IF EXISTS (SELECT 1 FROM pg_class WHERE oid = views[i]) THEN
        EXECUTE format('DROP %s %s CASCADE',
                       CASE (SELECT relkind FROM pg_class WHERE oid = views[i]) WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'VIEW' END,
                       views[i]::regclass);
      END IF;
    END LOOP;
    FOREACH x IN ARRAY fks LOOP
      SELECT conname, conrelid INTO d FROM pg_constraint WHERE oid = x;
      IF FOUND THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', d.conrelid::regclass, d.conname);
      END IF;
    END LOOP;
    -- A partition's foreign keys cloned from its parent stand alone once it is detached; attaching
    -- it again (undrop) clones them anew, so they are dropped below but not recorded.
    IF may_point_out AND partition_of IS NOT NULL THEN
      inherited := ARRAY(SELECT co.oid FROM pg_constraint co WHERE co.conrelid = r AND co.conparentid <> 0);
    END IF;
    IF partition_of IS NOT NULL THEN
      EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', partition_of->>'parent', r::regclass);
    END IF;

    -- What points outwards from the tables (issue 22): triggers, rules, foreign keys, checks and
    -- defaults that use an object that stays behind, and grants to other roles. The server's DROP
    -- takes them along; kept in quarantine they would make a later DROP FUNCTION, DROP TABLE or
    -- DROP ROLE fail that succeeds direct. Each is recorded with its definition (on, on_oid: the
    -- relation it belongs to, as named now) for undrop, then dropped; cloned pieces follow their
    -- parent's. Read only when the tables have any such piece (may_point_out, read with their
    -- names), and as dynamic SQL: the block is compiled anew at every DROP, so a table with none
    -- pays neither the statement's parsing nor its planning.
    IF may_point_out THEN
      EXECUTE $predrop_d$
      WITH inner_set AS (
        -- What moves with the tables: their partitions, indexes, owned sequences and row types. A
        -- dependency on anything else points outwards.
        SELECT $2 || ARRAY(SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = ANY($2))
                  || ARRAY(SELECT o.objid FROM pg_depend o WHERE o.classid = 'pg_class'::regclass
                           AND o.refclassid = 'pg_class'::regclass AND o.refobjid = ANY($2) AND o.deptype IN ('a', 'i')) AS rels,
               ARRAY(SELECT c.reltype FROM pg_class c WHERE c.oid = ANY($2)
                     UNION ALL SELECT ty.typarray FROM pg_type ty JOIN pg_class c ON c.reltype = ty.oid
                     WHERE c.oid = ANY($2)) AS types),
      pieces AS (
        SELECT tableoid AS classid, oid AS objid FROM pg_trigger WHERE tgrelid = ANY($1)
        UNION ALL SELECT tableoid, oid FROM pg_rewrite WHERE ev_class = ANY($1)
        UNION ALL SELECT tableoid, oid FROM pg_constraint WHERE conrelid = ANY($1)
        UNION ALL SELECT tableoid, oid FROM pg_attrdef WHERE adrelid = ANY($1)
        UNION ALL SELECT tableoid, oid FROM pg_policy WHERE polrelid = ANY($1)),
      -- The pieces with a normal dependency on something that does not move.
      outward AS (
        SELECT DISTINCT dep.classid, dep.objid FROM pieces p JOIN pg_depend dep USING (classid, objid), inner_set s
         WHERE dep.deptype = 'n'
           AND NOT (dep.refclassid = 'pg_class'::regclass AND dep.refobjid = ANY(s.rels))
           AND NOT (dep.refclassid = 'pg_type'::regclass AND dep.refobjid = ANY(s.types))),
      -- Columns of a type that stays behind (an enum, a domain, a composite, another table's row
      -- type, a range; not an extension's): changed to the type's base type when it is a domain
      -- over a built-in one (no rewrite), to text otherwise (text[] for an array), on the tree's
      -- root (the change recurses to its partitions); a column's own collation that is not built
      -- in goes back to the default (kept, a DROP SCHEMA … CASCADE of the collation's schema would
      -- drop the column). Undrop casts them back.
      column_types AS (
        SELECT a.attname,
               format_type(a.atttypid, a.atttypmod)
                 || CASE WHEN cl.oid IS NULL THEN '' ELSE ' COLLATE ' || cl.oid::regcollation::text END AS was,
               CASE WHEN NOT a.outward_type THEN format_type(a.atttypid, a.atttypmod)
                    WHEN ty.typtype = 'd' AND bt.typnamespace = 'pg_catalog'::regnamespace
                      THEN format_type(ty.typbasetype, ty.typtypmod)
                    WHEN ty.typcategory = 'A' OR a.attndims > 0 THEN 'text[]'
                    ELSE 'text' END
                 || CASE WHEN cl.oid IS NULL THEN '' ELSE ' COLLATE pg_catalog."default"' END AS now
          FROM (SELECT a.*,
                       EXISTS (SELECT 1 FROM pg_depend ct, inner_set s
                                WHERE ct.classid = 'pg_class'::regclass AND ct.objid = a.attrelid AND ct.objsubid = a.attnum
                                  AND ct.refclassid = 'pg_type'::regclass AND ct.deptype = 'n'
                                  AND NOT (ct.refobjid = ANY(s.types))
                                  AND NOT EXISTS (SELECT 1 FROM pg_depend ex WHERE ex.classid = 'pg_type'::regclass
                                                    AND ex.objid = ct.refobjid AND ex.deptype = 'e')) AS outward_type
                  FROM pg_attribute a
                 WHERE a.attrelid = ($1)[1] AND a.attnum > 0 AND NOT a.attisdropped) a
          JOIN pg_type ty ON ty.oid = a.atttypid
          LEFT JOIN pg_type bt ON bt.oid = ty.typbasetype
          -- A collation of its own that is not built in (only those have a pg_depend row).
          LEFT JOIN pg_collation cl ON cl.oid = a.attcollation AND EXISTS (
            SELECT 1 FROM pg_depend cd WHERE cd.classid = 'pg_class'::regclass AND cd.objid = a.attrelid
               AND cd.objsubid = a.attnum AND cd.refclassid = 'pg_collation'::regclass AND cd.refobjid = a.attcollation)
         WHERE a.outward_type OR cl.oid IS NOT NULL),
      -- A trigger's or a rule's state other than enabled, as ALTER TABLE says it.
      enabling (state, words) AS (VALUES ('D'::"char", 'DISABLE'), ('R', 'ENABLE REPLICA'), ('A', 'ENABLE ALWAYS'))
      SELECT coalesce(jsonb_agg(p.piece ORDER BY p.ord, p.piece->>'on', p.piece->>'name'), '[]') FROM (
        SELECT 0 AS ord, jsonb_build_object('kind', 'column_type', 'name', ct.attname::text, 'on', ($1)[1]::regclass::text,
            'on_oid', ($1)[1]::bigint,
            'definition', format('ALTER TABLE %s ALTER COLUMN %I TYPE %s USING %I::%s;', ($1)[1]::regclass, ct.attname,
                                 ct.was, ct.attname, ct.was),
            'drop', format('ALTER TABLE %s ALTER COLUMN %I TYPE %s USING %I::%s', ($1)[1]::regclass, ct.attname,
                           ct.now, ct.attname, ct.now)) AS piece
          FROM column_types ct
        UNION ALL
        SELECT 1, jsonb_build_object('kind', 'trigger', 'name', tg.tgname::text, 'on', tg.tgrelid::regclass::text,
            'on_oid', tg.tgrelid::bigint,
            'definition', pg_get_triggerdef(tg.oid) || ';'
                          || CASE WHEN e.words IS NULL THEN ''
                                  ELSE format(' ALTER TABLE %s %s TRIGGER %I;', tg.tgrelid::regclass, e.words, tg.tgname) END,
            'drop', format('DROP TRIGGER %I ON %s', tg.tgname, tg.tgrelid::regclass)) AS piece
          FROM pg_trigger tg LEFT JOIN enabling e ON e.state = tg.tgenabled
         WHERE tg.tgrelid = ANY($1) AND NOT tg.tgisinternal AND tg.tgparentid = 0
           AND (tg.tableoid, tg.oid) IN (SELECT classid, objid FROM outward)
        UNION ALL
        SELECT 2, jsonb_build_object('kind', 'rule', 'name', rw.rulename::text, 'on', rw.ev_class::regclass::text,
            'on_oid', rw.ev_class::bigint,
            'definition', pg_get_ruledef(rw.oid)
                          || CASE WHEN e.words IS NULL THEN ''
                                  ELSE format(' ALTER TABLE %s %s RULE %I;', rw.ev_class::regclass, e.words, rw.rulename) END,
            'drop', format('DROP RULE %I ON %s', rw.rulename, rw.ev_class::regclass))
          FROM pg_rewrite rw LEFT JOIN enabling e ON e.state = rw.ev_enabled
         WHERE rw.ev_class = ANY($1) AND rw.rulename <> '_RETURN'
           AND (rw.tableoid, rw.oid) IN (SELECT classid, objid FROM outward)
        UNION ALL
        SELECT 3, jsonb_build_object('kind', CASE co.contype WHEN 'f' THEN 'foreign_key' ELSE 'check' END,
            'name', co.conname::text, 'on', co.conrelid::regclass::text, 'on_oid', co.conrelid::bigint,
            'definition', CASE WHEN co.oid = ANY($3) THEN NULL
                          ELSE format('ALTER TABLE %s ADD CONSTRAINT %I %s;', co.conrelid::regclass, co.conname,
                                      pg_get_constraintdef(co.oid)) END,
            'drop', format('ALTER TABLE %s DROP CONSTRAINT %I', co.conrelid::regclass, co.conname))
          FROM pg_constraint co
         WHERE co.conrelid = ANY($1) AND co.contype IN ('f', 'c')
           AND (co.conparentid = 0 OR co.oid = ANY($3)) AND co.conislocal AND co.coninhcount = 0
           AND (co.tableoid, co.oid) IN (SELECT classid, objid FROM outward)
        UNION ALL
        -- A default; a stored generated column keeps its values as a plain column (SET EXPRESSION,
        -- for undrop, exists from PostgreSQL 17 on; before, undrop reports it).
        SELECT 4, jsonb_build_object('kind', CASE a.attgenerated WHEN 's' THEN 'generated' ELSE 'default' END,
            'name', a.attname::text, 'on', ad.adrelid::regclass::text, 'on_oid', ad.adrelid::bigint,
            'definition', format(CASE a.attgenerated WHEN 's' THEN 'ALTER TABLE %s ALTER COLUMN %I SET EXPRESSION AS (%s);'
                                                      ELSE 'ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s;' END,
                                 ad.adrelid::regclass, a.attname, pg_get_expr(ad.adbin, ad.adrelid)),
            'drop', format('ALTER TABLE %s ALTER COLUMN %I DROP %s', ad.adrelid::regclass, a.attname,
                           CASE a.attgenerated WHEN 's' THEN 'EXPRESSION' ELSE 'DEFAULT' END))
          FROM pg_attrdef ad JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
         WHERE ad.adrelid = ANY($1) AND (a.attgenerated = '' OR (a.attgenerated = 's' AND a.attinhcount = 0))
           AND (ad.tableoid, ad.oid) IN (SELECT classid, objid FROM outward)
        UNION ALL
        SELECT 5, jsonb_build_object('kind', 'grant', 'name', g.grantee::regrole::text, 'on', g.relid::regclass::text, 'on_oid', g.relid::bigint,
            'definition', string_agg(format('GRANT %s%s ON %s TO %s%s;', g.privilege_type,
                                            CASE WHEN g.col IS NULL THEN '' ELSE format(' (%I)', g.col) END,
                                            g.relid::regclass, g.grantee::regrole,
                                            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END), ' '
                                     ORDER BY g.col NULLS FIRST, g.privilege_type),
            -- A table's REVOKE takes its columns' privileges along.
            'drop', format('REVOKE ALL ON %s FROM %s CASCADE', g.relid::regclass, g.grantee::regrole))
          FROM (SELECT c.oid AS relid, NULL::name AS col, x.grantee, x.privilege_type, x.is_grantable
                  FROM pg_class c, aclexplode(c.relacl) x WHERE c.oid = ANY($1) AND x.grantee NOT IN (0, c.relowner)
                UNION ALL
                SELECT c.oid, at.attname, x.grantee, x.privilege_type, x.is_grantable
                  FROM pg_class c JOIN pg_attribute at ON at.attrelid = c.oid, aclexplode(at.attacl) x
                  WHERE c.oid = ANY($1) AND at.attnum > 0 AND NOT at.attisdropped AND x.grantee NOT IN (0, c.relowner)) g
          GROUP BY g.relid, g.grantee
        UNION ALL
        -- Row security policies that use an object left behind or name a role.
        SELECT 6, jsonb_build_object('kind', 'policy', 'name', pol.polname::text, 'on', pol.polrelid::regclass::text,
            'on_oid', pol.polrelid::bigint,
            'definition', format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s;', pol.polname, pol.polrelid::regclass,
                                 CASE WHEN pol.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                                 CASE pol.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                                                 WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                                 (SELECT string_agg(CASE WHEN x.r = 0 THEN 'PUBLIC' ELSE x.r::regrole::text END, ', '
                                                    ORDER BY x.o) FROM unnest(pol.polroles) WITH ORDINALITY x(r, o)),
                                 CASE WHEN pol.polqual IS NULL THEN ''
                                      ELSE ' USING (' || pg_get_expr(pol.polqual, pol.polrelid) || ')' END,
                                 CASE WHEN pol.polwithcheck IS NULL THEN ''
                                      ELSE ' WITH CHECK (' || pg_get_expr(pol.polwithcheck, pol.polrelid) || ')' END),
            'drop', format('DROP POLICY %I ON %s', pol.polname, pol.polrelid::regclass))
          FROM pg_policy pol
         WHERE pol.polrelid = ANY($1)
           AND ((pol.tableoid, pol.oid) IN (SELECT classid, objid FROM outward) OR pol.polroles <> '{0}')
        UNION ALL
        -- Extended statistics: the DROP takes them along, kept they stay listed in their own schema.
        SELECT 7, jsonb_build_object('kind', 'statistics', 'name', st.stxname::text, 'on', st.stxrelid::regclass::text,
            'on_oid', st.stxrelid::bigint,
            'definition', pg_get_statisticsobjdef(st.oid) || ';'
                          || CASE WHEN coalesce(st.stxstattarget, -1) >= 0
                                  THEN format(' ALTER STATISTICS %I.%I SET STATISTICS %s;', sn.nspname, st.stxname,
                                              st.stxstattarget) ELSE '' END,
            'drop', format('DROP STATISTICS %I.%I', sn.nspname, st.stxname))
          FROM pg_statistic_ext st JOIN pg_namespace sn ON sn.oid = st.stxnamespace
         WHERE st.stxrelid = ANY($1)
        UNION ALL
        -- Publications: the DROP takes the table out of them.
        SELECT 8, jsonb_build_object('kind', 'publication', 'name', pb.pubname::text, 'on', pr.prrelid::regclass::text,
            'on_oid', pr.prrelid::bigint,
            'definition', format('ALTER PUBLICATION %I ADD TABLE %s%s%s;', pb.pubname, pr.prrelid::regclass,
                                 CASE WHEN pr.prattrs IS NULL THEN '' ELSE ' (' || (
                                   SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute a
                                    WHERE a.attrelid = pr.prrelid AND a.attnum = ANY(pr.prattrs)) || ')' END,
                                 CASE WHEN pr.prqual IS NULL THEN ''
                                      ELSE ' WHERE (' || pg_get_expr(pr.prqual, pr.prrelid) || ')' END),
            'drop', format('ALTER PUBLICATION %I DROP TABLE %s', pb.pubname, pr.prrelid::regclass))
          FROM pg_publication_rel pr JOIN pg_publication pb ON pb.oid = pr.prpubid
         WHERE pr.prrelid = ANY($1)
        UNION ALL
        -- A typed table (CREATE TABLE … OF type): the type stays behind.
        SELECT 9, jsonb_build_object('kind', 'of_type', 'name', tc.reloftype::regtype::text, 'on', tc.oid::regclass::text,
            'on_oid', tc.oid::bigint,
            'definition', format('ALTER TABLE %s OF %s;', tc.oid::regclass, tc.reloftype::regtype),
            'drop', format('ALTER TABLE %s NOT OF', tc.oid::regclass))
          FROM pg_class tc WHERE tc.oid = ANY($1) AND tc.reloftype <> 0
        UNION ALL
        -- Indexes on something left behind (an operator class, a collation, a function, a type in an
        -- expression); not those of constraints, nor a partition's copy of its parent's.
        SELECT 10, jsonb_build_object('kind', 'index', 'name', ic.relname::text, 'on', ix.indrelid::regclass::text,
            'on_oid', ix.indrelid::bigint,
            'definition', pg_get_indexdef(ix.indexrelid) || ';',
            'drop', format('DROP INDEX %s', ix.indexrelid::regclass))
          FROM pg_index ix JOIN pg_class ic ON ic.oid = ix.indexrelid, inner_set s
         WHERE ix.indrelid = ANY($1) AND NOT ic.relispartition
           AND NOT EXISTS (SELECT 1 FROM pg_constraint co WHERE co.conindid = ix.indexrelid)
           AND EXISTS (SELECT 1 FROM pg_depend id WHERE id.classid = 'pg_class'::regclass AND id.objid = ix.indexrelid
                         AND id.deptype = 'n'
                         AND NOT (id.refclassid = 'pg_class'::regclass AND id.refobjid = ANY(s.rels))
                         AND NOT (id.refclassid = 'pg_type'::regclass AND id.refobjid = ANY(s.types)))
      ) p
      $predrop_d$ INTO detached USING tree, moved, inherited;
      -- Last first: a column's type changes once the defaults and checks that use the type are gone
      -- (undrop restores it first, in the recorded order). A column whose type cannot change (a
      -- partition key, an index expression that needs the type) would block a later DROP TYPE:
      -- such a table is not kept.
      FOR i IN REVERSE jsonb_array_length(detached) - 1 .. 0 LOOP
        t := detached->i;
        IF t->>'kind' <> 'column_type' THEN
          EXECUTE t->>'drop';
          CONTINUE;
        END IF;
        BEGIN
          EXECUTE t->>'drop';
        EXCEPTION WHEN OTHERS THEN
          RAISE EXCEPTION 'predrop quarantine: column % of % cannot leave its type (%)', quote_ident(t->>'name'),
            t->>'on', SQLERRM;
        END;
      END LOOP;
      detail := detail || jsonb_build_object('detached', detached);
    END IF;

    -- Each relation's indexes and owned sequences, read after the detach: a column's new type
    -- rebuilt the indexes that use it, under new OIDs.
    FOREACH m IN ARRAY tree LOOP
      t := jsonb_build_object('relations', coalesce((
        SELECT jsonb_agg(jsonb_build_object('kind', k.kind, 'oid', k.oid::bigint, 'name', k.name) ORDER BY k.kind, k.oid)
        FROM (SELECT 'index' AS kind, i.indexrelid AS oid, ic.relname::text AS name FROM pg_index i
                JOIN pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid = m
              UNION ALL
              SELECT 'sequence', sq.oid, sq.relname::text FROM pg_depend dep JOIN pg_class sq ON sq.oid = dep.objid
                WHERE dep.classid = 'pg_class'::regclass AND dep.refclassid = 'pg_class'::regclass
                  AND dep.refobjid = m AND dep.deptype IN ('a', 'i') AND sq.relkind = 'S') k), '[]'));
      IF m = r THEN
        detail := detail || t;
      ELSE
        members := (SELECT jsonb_agg(CASE WHEN (e.value->>'oid')::oid = m THEN e.value || t ELSE e.value END ORDER BY e.o)
                    FROM jsonb_array_elements(members) WITH ORDINALITY e(value, o));
      END IF;
    END LOOP;
    detail := detail || jsonb_build_object('members', members);

    -- Renamed before the move: in the quarantine schema the owner has no USAGE to name them by.
    -- Every index and sequence gets a name of its own OID, so versions of one table never collide.
    FOREACH m IN ARRAY tree LOOP
      t := CASE WHEN m = r THEN detail ELSE (SELECT e.value FROM jsonb_array_elements(members) e WHERE (e.value->>'oid')::oid = m) END;
      FOR d IN SELECT (e.value->>'kind') AS kind, (e.value->>'oid')::oid AS oid FROM jsonb_array_elements(t->'relations') e LOOP
        EXECUTE format('ALTER %s %s RENAME TO %I', CASE d.kind WHEN 'index' THEN 'INDEX' ELSE 'SEQUENCE' END, d.oid::regclass,
                       'q' || m || CASE d.kind WHEN 'index' THEN '_i' ELSE '_s' END || d.oid);
      END LOOP;
      IF m = r THEN
        EXECUTE format('COMMENT ON TABLE %s IS %L', m::regclass, detail::text);
      ELSE
        EXECUTE format('COMMENT ON TABLE %s IS %L', m::regclass,
                       jsonb_build_object('predrop_quarantine_member', 1, 'id', q_id, 'of', r::bigint, 'hold', hold_id)::text);
      END IF;
      EXECUTE format('ALTER TABLE %s RENAME TO %I', m::regclass, t->>'quarantine_table');
      EXECUTE format('ALTER TABLE %s SET SCHEMA %I', m::regclass, qs);
      -- Given to the quarantine's owner where the session may (issue 22), so that a later DROP ROLE
      -- of its owner succeeds as it would direct; undrop gives it back (owner_was).
      IF t->>'owner_was' IS NOT NULL THEN
        BEGIN
          EXECUTE format('ALTER TABLE %s OWNER TO %s', m::regclass, qs_owner::regrole);
        EXCEPTION WHEN insufficient_privilege THEN
          NULL;   -- a membership without SET (PostgreSQL 16+): the owner stays
        END;
      END IF;
    END LOOP;
  END LOOP;

  FOREACH r IN ARRAY real_drops LOOP
    IF EXISTS (SELECT 1 FROM pg_class WHERE oid = r) THEN
      EXECUTE format('DROP TABLE %s%s', r::regclass, CASE WHEN do_cascade THEN ' CASCADE' ELSE '' END);
    END IF;
  END LOOP;

  PERFORM set_config('search_path', saved_path, true);
  PERFORM set_config('client_min_messages', saved_cmm, true);
EXCEPTION WHEN OTHERS THEN
  IF SQLERRM LIKE 'predrop quarantine: %' THEN
    RAISE;
  END IF;
  RAISE EXCEPTION 'predrop quarantine: %', SQLERRM USING ERRCODE = SQLSTATE;
END
)SQL";

std::string literal(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string quote_ident_always(std::string_view name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string quote_qualified_ident(std::string_view qualified) {
  auto [schema, table] = capture::split_qualified(qualified);
  return quote_ident_always(schema) + "." + quote_ident_always(table);
}

namespace {

// What the function is declared with besides its body. plan_cache_mode: the body's catalog
// queries take a variable each (`c.oid = m`), so the server's default planned every one of them
// afresh at every call (a custom plan looked cheaper than the generic one), a fifth of the move's
// time (issue 21: 1.91 -> 1.52 ms a move of a 200-row table, PostgreSQL 15). Their generic plans
// are the same index scans. The setting is the function's alone: the server restores the
// session's at its exit.
constexpr const char* kMoveAttributes = " SET plan_cache_mode = force_generic_plan";

// The function's name carries a hash of its attributes and body, so sidecars of different versions
// in one fleet each call their own and an upgrade needs no CREATE OR REPLACE (which a plan cache
// would race).
const std::string& move_function_name() {
  static const std::string name = [] {
    uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (const char* text : {kMoveAttributes, kMoveBody})
      for (const char* p = text; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string("move_") + hex;
  }();
  return name;
}


std::string move_argument(const QuarantineMove& move) {
  nlohmann::json arg = {{"quarantine_schema", move.quarantine_schema},
                        {"cascade", move.cascade},
                        {"max_bytes", move.max_bytes},
                        {"tables", nlohmann::json::array()},
                        {"schemas", move.schemas}};
  if (!move.hold_id.empty()) arg["hold"] = move.hold_id;
  for (const auto& t : move.tables)
    arg["tables"].push_back({{"schema", t.schema}, {"table", t.table}, {"quarantine", t.quarantine}});
  // ensure_ascii: the literal is pure ASCII whatever the client_encoding.
  std::string text = arg.dump(-1, ' ', true);
  check_tag_free(text);
  return "$predrop_a$" + text + "$predrop_a$::jsonb";
}

// What PUBLIC (not only the running role) may use: the function is installed for every role.
std::string usable_by_public_condition() {
  return "n.nspname = '" + std::string(kMoveFunctionSchema) + "' AND p.proname = '" + move_function_name() +
         "' AND pg_catalog.aclcontains(n.nspacl, pg_catalog.makeaclitem(0, n.nspowner, 'USAGE', false))"
         " AND (p.proacl IS NULL OR pg_catalog.aclcontains(p.proacl, pg_catalog.makeaclitem(0, p.proowner, 'EXECUTE', false)))";
}

}  // namespace

std::string move_statements(const QuarantineMove& move) {
  const std::string fn = std::string(kMoveFunctionSchema) + "." + move_function_name();
  // Without the check a missing function's error would read as the move's. It is an expression,
  // not a query: PL/pgSQL evaluates it without planning a join of pg_proc and pg_namespace, which
  // cost the server about 0.45 ms a quarantined DROP (a recreate cycle direct with the substitute
  // in the DROP's place: 4.70 ms with the query, 4.13 with the expression, six runs each). The CASE
  // keeps the function's lookup from a schema the role may not use (where to_regprocedure errs
  // before PostgreSQL 16); a missing schema or function is NULL, so false.
  return "IF NOT coalesce(CASE WHEN pg_catalog.has_schema_privilege(pg_catalog.to_regnamespace('" +
         std::string(kMoveFunctionSchema) + "'), 'USAGE')\n"
         "                    THEN pg_catalog.has_function_privilege(pg_catalog.to_regprocedure('" + fn +
         "(jsonb)'), 'EXECUTE') END, false) THEN\n"
         "  RAISE EXCEPTION '" + std::string(kMoveFunctionMissing) + " (" + fn + ")';\n"
         "END IF;\n"
         "PERFORM " + fn + "(" + move_argument(move) + ");\n";
}

std::string move_sql(const QuarantineMove& move) {
  if (move.via_function)
    return "DO $predrop_c$\nBEGIN\n" + move_statements(move) + "END\n$predrop_c$";
  // The argument is a block-level constant declared ahead of the body's own DECLARE section.
  return "DO $predrop_q$\n<<predrop_quarantine_move>>\nDECLARE\n  arg constant jsonb := " + move_argument(move) +
         ";\nBEGIN\n" + kMoveBody + ";\nEND\n$predrop_q$";
}

std::string move_function_check_sql() {
  return "SELECT EXISTS (SELECT FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
         "WHERE " + usable_by_public_condition() + ")";
}

namespace {

std::mutex move_function_mutex;
std::set<std::string> move_function_databases;

}  // namespace

void note_move_function(const std::string& database, bool usable) {
  std::lock_guard lock(move_function_mutex);
  if (usable) move_function_databases.insert(database);
  else move_function_databases.erase(database);
}

bool move_function_usable(const std::string& database) {
  std::lock_guard lock(move_function_mutex);
  return move_function_databases.count(database) > 0;
}

namespace {
std::mutex table_quarantined_mutex;
std::function<void(const std::string&)> table_quarantined_listener;
}  // namespace

void set_table_quarantined_listener(std::function<void(const std::string&)> listener) {
  std::lock_guard lock(table_quarantined_mutex);
  table_quarantined_listener = std::move(listener);
}

void note_table_quarantined(const std::string& database) {
  std::lock_guard lock(table_quarantined_mutex);
  if (table_quarantined_listener) table_quarantined_listener(database);
}

namespace {

std::string quarantine_move_function_sql() {
  return std::string("CREATE FUNCTION ") + kMoveFunctionSchema + "." + move_function_name() +
         "(arg jsonb) RETURNS void LANGUAGE plpgsql SECURITY INVOKER" + kMoveAttributes +
         " AS $predrop_f$\nBEGIN\n" + kMoveBody +
         ";\nEND\n$predrop_f$";
}

constexpr int kPrepareLockClass = 1885630832;  // "pdqp"

}  // namespace

std::string prepare_sql(std::string_view schema) {
  check_tag_free(schema);
  const std::string q = quote_ident_always(schema);
  const std::string fs = kMoveFunctionSchema;
  // One statement (a DO block), so it runs in the extended protocol too. The grants are (re)set
  // only by the schema's owner: a role that finds someone else's schema leaves it as it is.
  // CREATE SCHEMA IF NOT EXISTS wants CREATE on the database even when the schema exists.
  // The move's function goes in a schema of its own: the quarantine's gives USAGE to nobody, and
  // calling a function wants it. Without CREATE on the database (or beside another sidecar that
  // made it first) the move runs inline, as it did before the function.
  // Concurrent first DROPs in a new database prepare at once, on several capture connections or
  // sidecars: without the lock one of them failed on the schema's unique index or with "tuple
  // concurrently updated" on the grants. The transaction's lock makes the later ones wait, then
  // find everything made.
  return "DO $predrop_p$ BEGIN\n"
         "  PERFORM pg_catalog.pg_advisory_xact_lock(" + std::to_string(kPrepareLockClass) +
         ", pg_catalog.hashtext(" + literal(schema) + "));\n"
         "  IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = " + literal(schema) + ") THEN\n"
         "    CREATE SCHEMA IF NOT EXISTS " + q + ";\n"
         "  END IF;\n"
         "  IF pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = " + literal(schema) + "), 'USAGE') THEN\n"
         "    REVOKE ALL ON SCHEMA " + q + " FROM PUBLIC;\n"
         "    GRANT CREATE ON SCHEMA " + q + " TO PUBLIC;\n"
         "    COMMENT ON SCHEMA " + q + " IS 'predrop quarantine: dropped tables held for undrop; CREATE for all, USAGE for nobody';\n"
         "  END IF;\n"
         "  BEGIN\n"
         "    IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = " + literal(fs) + ") THEN\n"
         "      CREATE SCHEMA " + fs + ";\n"
         "      REVOKE ALL ON SCHEMA " + fs + " FROM PUBLIC;\n"
         "      GRANT USAGE ON SCHEMA " + fs + " TO PUBLIC;\n"
         "      COMMENT ON SCHEMA " + fs + " IS 'predrop quarantine: the move a quarantined DROP runs; USAGE for all';\n"
         "    END IF;\n"
         "    IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace\n"
         "                   WHERE n.nspname = " + literal(fs) + " AND p.proname = " + literal(move_function_name()) + ") THEN\n"
         "      " + quarantine_move_function_sql() + ";\n"
         "      REVOKE ALL ON FUNCTION " + fs + "." + move_function_name() + "(jsonb) FROM PUBLIC;\n"
         "      GRANT EXECUTE ON FUNCTION " + fs + "." + move_function_name() + "(jsonb) TO PUBLIC;\n"
         "    END IF;\n"
         "  EXCEPTION WHEN insufficient_privilege OR duplicate_schema OR duplicate_function OR unique_violation THEN\n"
         "    NULL;\n"
         "  END;\n"
         "END $predrop_p$";
}

std::string catalog_sql(std::string_view schema, bool measured_given) {
  const std::string bytes =
      "coalesce((SELECT sum(pg_total_relation_size(p.relid))::bigint FROM pg_partition_tree(c.oid) p), "
      "pg_total_relation_size(c.oid))";
  return "SELECT c.relname::text AS quarantine_table, c.oid::bigint AS oid, d.description::jsonb AS detail, " +
         (measured_given ? "CASE WHEN c.relname = ANY($1::text[]) THEN NULL ELSE " + bytes + " END" : bytes) +
         " AS bytes "
         "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
         "JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0 "
         "WHERE n.nspname = " +
         literal(schema) +
         " AND c.relkind IN ('r', 'p') AND " + std::string(kQuarantineMarkSql) + " "
         "ORDER BY d.description::jsonb->>'dropped_at', c.oid";
}

std::string yield_find_sql() {
  // pg_depend names what a relation uses (a partition key's or an index's operator class, an access
  // method, a column's type); an extension's objects are those depending on it with deptype 'e'.
  // Owner, tablespace and access method are read from pg_class itself. The comment is read as the
  // move reads it (kMoveBody), without obj_description, whose SQL body is planned afresh at
  // every call.
  return R"SQL(WITH y AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS y(kind, name, schema, method, n)
), qs AS (
  SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1
), q AS (
  SELECT c.oid, c.relowner, c.relam, c.reltablespace FROM pg_catalog.pg_class c JOIN qs ON c.relnamespace = qs.oid
), fam AS (
  SELECT y.n, f.oid FROM y JOIN pg_catalog.pg_opfamily f ON f.opfname = y.name
    JOIN pg_catalog.pg_am am ON am.oid = f.opfmethod AND am.amname = y.method
    JOIN pg_catalog.pg_namespace ns ON ns.oid = f.opfnamespace
   WHERE y.kind = 'operator_family' AND (ns.nspname = y.schema OR (y.schema = '' AND ns.nspname = ANY ($6::text[])))
), obj AS (
  SELECT y.n, 'pg_catalog.pg_opclass'::pg_catalog.regclass::oid AS cls, oc.oid FROM y
    JOIN pg_catalog.pg_opclass oc ON oc.opcname = y.name
    JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod AND am.amname = y.method
    JOIN pg_catalog.pg_namespace ns ON ns.oid = oc.opcnamespace
   WHERE y.kind = 'operator_class' AND (ns.nspname = y.schema OR (y.schema = '' AND ns.nspname = ANY ($6::text[])))
  UNION ALL
  SELECT fam.n, 'pg_catalog.pg_opfamily'::pg_catalog.regclass::oid, fam.oid FROM fam
  UNION ALL
  SELECT fam.n, 'pg_catalog.pg_opclass'::pg_catalog.regclass::oid, oc.oid FROM fam
    JOIN pg_catalog.pg_opclass oc ON oc.opcfamily = fam.oid
  UNION ALL
  SELECT y.n, 'pg_catalog.pg_am'::pg_catalog.regclass::oid, am.oid FROM y
    JOIN pg_catalog.pg_am am ON am.amname = y.name WHERE y.kind = 'access_method'
  UNION ALL
  SELECT y.n, d.classid, d.objid FROM y JOIN pg_catalog.pg_extension x ON x.extname = y.name
    JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = x.oid
     AND d.deptype = 'e'
   WHERE y.kind = 'extension'
), hit AS (
  SELECT y.n, q.oid FROM y JOIN pg_catalog.pg_roles r ON r.rolname = y.name JOIN q ON q.relowner = r.oid
   WHERE y.kind = 'role'
  UNION ALL
  SELECT y.n, q.oid FROM y JOIN pg_catalog.pg_tablespace t ON t.spcname = y.name JOIN q ON q.reltablespace = t.oid
   WHERE y.kind = 'tablespace'
  UNION ALL
  SELECT y.n, q.oid FROM y JOIN pg_catalog.pg_am am ON am.amname = y.name JOIN q ON q.relam = am.oid
   WHERE y.kind = 'access_method'
  UNION ALL
  SELECT obj.n, q.oid FROM obj JOIN pg_catalog.pg_depend d ON d.refclassid = obj.cls AND d.refobjid = obj.oid
     AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
    JOIN q ON q.oid = d.objid
), tbl AS (
  -- An index or an owned sequence stands for its table.
  SELECT h.n, COALESCE((SELECT i.indrelid FROM pg_catalog.pg_index i WHERE i.indexrelid = h.oid),
                       (SELECT d.refobjid FROM pg_catalog.pg_depend d
                         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = h.oid
                           AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')
                         LIMIT 1),
                       h.oid) AS oid
    FROM hit h
), tree AS (
  SELECT t.n, COALESCE(pg_catalog.pg_partition_root(t.oid)::oid, t.oid) AS oid FROM tbl t
)
SELECT DISTINCT ON (c.oid) tree.n, c.oid::bigint, c.relname::text,
       (SELECT ds.description FROM pg_catalog.pg_description ds
         WHERE ds.objoid = c.oid AND ds.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND ds.objsubid = 0)
  FROM tree JOIN pg_catalog.pg_class c ON c.oid = tree.oid JOIN qs ON c.relnamespace = qs.oid
 WHERE c.relkind IN ('r', 'p')
 ORDER BY c.oid, tree.n)SQL";
}

}  // namespace predrop::quarantine
