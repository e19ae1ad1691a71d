-- Run by test_psql.sh with psql -a (echo), once directly and once through predrop, into a fresh database.
\set VERBOSITY verbose
\set SHOW_CONTEXT always
-- multi-statement strings: one simple Query message holding several statements
SELECT 1 AS one; SELECT 'two' AS two, 2.5::numeric AS n; VALUES (1, 'a'), (2, NULL);
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), tags text[], meta jsonb, created date DEFAULT '2024-01-02'); INSERT INTO items VALUES (1, 'apple', 1.25, '{red,fruit}', '{"k": 1}'), (2, 'båd ☃', NULL, '{}', 'null'); SELECT * FROM items ORDER BY id;
BEGIN; INSERT INTO items VALUES (3, 'c', 3, NULL, NULL); SAVEPOINT s1; INSERT INTO items VALUES (3, 'dup', 0, NULL, NULL); ROLLBACK TO s1; INSERT INTO items VALUES (4, 'd', 4, NULL, NULL); COMMIT;
SELECT id, name FROM items ORDER BY id;
-- errors: each must show the server's own text, SQLSTATE, position, detail, hint
SELECT 1/0;
SELECT * FROM no_such_table;
SELEC 1;
INSERT INTO items VALUES (1, 'dup', 0, NULL, NULL);
INSERT INTO items (id) VALUES (99);
SELECT 'x'::int;
SELECT 1; SELECT 1/0; SELECT 'not reached';
BEGIN; SELECT 1/0; SELECT 'in failed tx'; ROLLBACK;
-- notices and warnings
DO $$ BEGIN RAISE NOTICE 'hello % from %', 42, 'plpgsql'; RAISE WARNING 'careful: %', 'w'; RAISE INFO 'info line'; END $$;
DO $$ BEGIN RAISE NOTICE 'with detail' USING DETAIL = 'the detail', HINT = 'the hint', ERRCODE = '01000'; END $$;
DROP TABLE IF EXISTS does_not_exist;
CREATE OR REPLACE FUNCTION noisy(n int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN FOR i IN 1..n LOOP RAISE NOTICE 'tick %', i; END LOOP; RETURN n; END $$;
SELECT noisy(3);
DO $$ BEGIN RAISE EXCEPTION 'custom failure %', 7 USING ERRCODE = 'P0001', DETAIL = 'd', HINT = 'h'; END $$;
-- LISTEN/NOTIFY within one session (the PID is normalised)
LISTEN chan;
NOTIFY chan, 'payload one';
SELECT pg_notify('chan', 'payload two');
UNLISTEN chan;
-- \d family
CREATE SCHEMA s;
CREATE TABLE s.orders (id bigserial PRIMARY KEY, item int REFERENCES items(id) ON DELETE CASCADE, qty int CHECK (qty > 0), note varchar(40) COLLATE "C", UNIQUE (item, qty));
CREATE INDEX orders_note_idx ON s.orders (lower(note)) WHERE qty > 1;
CREATE VIEW s.v AS SELECT o.id, i.name FROM s.orders o JOIN items i ON i.id = o.item;
COMMENT ON TABLE s.orders IS 'orders table';
CREATE TYPE s.mood AS ENUM ('sad', 'ok', 'happy');
\d items
\d+ s.orders
\d s.v
\dt s.*
\di s.*
\dn s
\dT s.*
\df noisy
-- variables, \gset, \gexec, \crosstabview, formats
SELECT 10 AS a, 'x y' AS b \gset
\echo :a :b
SELECT format('SELECT %s AS gexec_%s', g, g) FROM generate_series(1,2) g \gexec
\pset format aligned
SELECT g, g % 2 AS odd, repeat('z', g) FROM generate_series(1, 5) g;
\pset format csv
SELECT g, md5(g::text) FROM generate_series(1, 5) g;
\pset format aligned
\x on
SELECT * FROM items WHERE id = 1;
\x off
-- a larger result
SELECT count(*), sum(length(x)) FROM (SELECT repeat(md5(g::text), 10) AS x FROM generate_series(1, 20000) g) t;
SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) g \g /dev/null
-- COPY through the psql protocol path (COPY ... FROM STDIN inline)
CREATE TABLE inline_copy (a int, b text);
COPY inline_copy FROM STDIN;
1	one
2	two
\N	null
\.
COPY inline_copy FROM STDIN WITH (FORMAT csv);
3,"three, quoted"
bad,row
\.
COPY inline_copy TO STDOUT WITH (FORMAT csv, HEADER);
-- settings round-trip
SET application_name = 'clients-test';
SHOW application_name;
SET TIME ZONE 'Asia/Kolkata';
SELECT '2024-06-01 12:00:00+00'::timestamptz;
RESET ALL;
SELECT current_setting('TimeZone') IS NOT NULL AS tz_set;
