-- A schema with most object kinds pg_dump handles; loaded directly, then dumped direct and through predrop.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS plpgsql;
CREATE SCHEMA shop;
COMMENT ON SCHEMA shop IS 'the shop';
CREATE TYPE shop.status AS ENUM ('new', 'paid', 'shipped');
CREATE DOMAIN shop.money_amount AS numeric(12,2) CHECK (VALUE >= 0);
CREATE TYPE shop.addr AS (street text, city text, zip varchar(10));
CREATE SEQUENCE shop.invoice_no START 1000 INCREMENT 7;
CREATE TABLE shop.customers (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email text NOT NULL UNIQUE,
  name text,
  address shop.addr,
  created timestamptz NOT NULL DEFAULT '2024-01-01 00:00:00+00',
  prefs jsonb DEFAULT '{}'::jsonb,
  tags text[]
);
CREATE TABLE shop.orders (
  id serial PRIMARY KEY,
  customer_id bigint NOT NULL REFERENCES shop.customers(id) ON DELETE CASCADE,
  status shop.status NOT NULL DEFAULT 'new',
  total shop.money_amount,
  invoice int DEFAULT nextval('shop.invoice_no'),
  note text COLLATE "C",
  CONSTRAINT total_positive CHECK (total IS NULL OR total > 0)
) WITH (fillfactor = 90);
CREATE INDEX orders_customer_idx ON shop.orders (customer_id, status) INCLUDE (total);
CREATE INDEX orders_note_trgm ON shop.orders (lower(note)) WHERE note IS NOT NULL;
CREATE TABLE shop.events (id bigint, at date NOT NULL, payload bytea) PARTITION BY RANGE (at);
CREATE TABLE shop.events_2024 PARTITION OF shop.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE shop.events_2025 PARTITION OF shop.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE UNLOGGED TABLE shop.scratch (k text PRIMARY KEY, v text);
CREATE VIEW shop.order_totals AS
  SELECT c.email, count(o.*) AS orders, sum(o.total) AS total FROM shop.customers c LEFT JOIN shop.orders o ON o.customer_id = c.id GROUP BY c.email;
CREATE MATERIALIZED VIEW shop.paid AS SELECT id, total FROM shop.orders WHERE status = 'paid' WITH DATA;
CREATE FUNCTION shop.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.note := coalesce(NEW.note, '') || ' touched'; RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.touch();
CREATE FUNCTION shop.add(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
CREATE PROCEDURE shop.noop() LANGUAGE sql AS $$ SELECT 1 $$;
CREATE POLICY own_rows ON shop.scratch USING (k = current_user);
ALTER TABLE shop.scratch ENABLE ROW LEVEL SECURITY;
COMMENT ON TABLE shop.orders IS 'orders, with a ''quote''';
COMMENT ON COLUMN shop.orders.note IS 'free text';
CREATE ROLE cl_dump_reader;
GRANT USAGE ON SCHEMA shop TO cl_dump_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA shop TO cl_dump_reader;
INSERT INTO shop.customers (email, name, address, prefs, tags)
  SELECT 'c' || g || '@example.com', 'Name ' || g || ' ünï', ROW('Street ' || g, 'City', lpad(g::text, 5, '0')::varchar(10))::shop.addr,
         jsonb_build_object('n', g, 'even', g % 2 = 0), ARRAY['t' || g % 5, 'x']
  FROM generate_series(1, 2000) g;
INSERT INTO shop.orders (customer_id, status, total, note)
  SELECT 1 + g % 2000, (ARRAY['new','paid','shipped'])[1 + g % 3]::shop.status, CASE WHEN g % 10 = 0 THEN NULL ELSE g * 1.5 END,
         CASE WHEN g % 4 = 0 THEN NULL ELSE E'note\t' || g || E'\\ with "quotes" and\nnewline' END
  FROM generate_series(1, 20000) g;
INSERT INTO shop.events SELECT g, date '2024-03-01' + (g % 500), decode(md5(g::text), 'hex') FROM generate_series(1, 5000) g;
INSERT INTO shop.scratch VALUES ('a', 'b');
REFRESH MATERIALIZED VIEW shop.paid;
SELECT setval('shop.invoice_no', 424242);
CREATE SCHEMA other;
CREATE TABLE other.t (x int);
INSERT INTO other.t VALUES (1), (2);
