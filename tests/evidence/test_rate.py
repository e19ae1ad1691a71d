#!/usr/bin/python3
"""predrop report's rate of change (issue 25, part 3; spec 023 US-003): over the window, overall and
per schema, the tables seen recreated or altered, how many changed shape, and of those how many
added, removed, renamed a column or changed a type; and a weekly series.

The shapes change through predrop, as a worker and an operator change them (psql): one table
recreated with a column more, one recreated as it was, one recreated as it was and then a column
renamed, one in another schema whose column changes type. Then the store's clock is set by hand
(captured_at moved back) so that the changes fall in three different weeks. The JSON, the text and
the HTML report say the same; the HTML chart's bars carry the JSON's weekly numbers, and headless
Chromium draws the page. Uses tests/hold/holdlib.py."""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hold"))
import holdlib  # noqa: E402

ROWS = "SELECT (ARRAY['Salta','Jujuy','Chaco','Misiones','Formosa'])[1 + g % 5], g FROM generate_series(1, 300) g"


def report(h, *args, fmt="json"):
    r = subprocess.run([h.bin, "report", "--store", h.store_conninfo(), "--format", fmt, *args],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        h.fail("report %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
        return {} if fmt == "json" else ""
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def monday(d):
    return (d - datetime.timedelta(days=d.weekday())).isoformat()


def test(h):
    h.start_predrop("--hold-timeout-ms", "10000")
    steps = [
        "CREATE SCHEMA datos", "CREATE SCHEMA otro",
        # Recreated with one column more.
        "CREATE TABLE datos.ventas (provincia text, monto int)", "INSERT INTO datos.ventas " + ROWS, "ANALYZE datos.ventas",
        "DROP TABLE datos.ventas",
        "CREATE TABLE datos.ventas (provincia text, monto int, anio int)",
        "INSERT INTO datos.ventas SELECT p, m, 2024 FROM (" + ROWS + ") s(p, m)", "ANALYZE datos.ventas",
        # Recreated as it was.
        "CREATE TABLE datos.fechas (provincia text, dia int)", "INSERT INTO datos.fechas " + ROWS, "ANALYZE datos.fechas",
        "DROP TABLE datos.fechas",
        "CREATE TABLE datos.fechas (provincia text, dia int)", "INSERT INTO datos.fechas " + ROWS, "ANALYZE datos.fechas",
        # Recreated as it was, then a column renamed by an operator.
        "CREATE TABLE datos.padron (nombre text, edad int)", "INSERT INTO datos.padron " + ROWS, "ANALYZE datos.padron",
        "DROP TABLE datos.padron",
        "CREATE TABLE datos.padron (nombre text, edad int)", "INSERT INTO datos.padron " + ROWS, "ANALYZE datos.padron",
        "ALTER TABLE datos.padron RENAME COLUMN edad TO anios",
        # Another schema: a column's type changes.
        "CREATE TABLE otro.tasas (region text, valor int)", "INSERT INTO otro.tasas " + ROWS, "ANALYZE otro.tasas",
        "ALTER TABLE otro.tasas ALTER COLUMN valor TYPE bigint",
    ]
    for sql in steps:
        r = h.psql(sql)
        h.check(r.rc == 0, "through predrop: " + sql[:60], r)

    want_overall = {"tables_seen": 4, "tables_changed_shape": 3, "added": 1, "removed": 0, "renamed": 1,
                    "type_changed": 1, "share_changed": 0.75}

    def settled():
        rate = report(h).get("rate", {})
        return rate if rate.get("overall") == want_overall else None
    rate = h.wait_for(settled, timeout=30, interval=0.5)
    h.check(rate is not None, "four tables seen recreated or altered, three changed shape: one added a column, "
            "one renamed one, one changed a type", report(h).get("rate"))
    if rate is None:
        return
    h.check(rate["by_schema"] == {
        "datos": {"tables_seen": 3, "tables_changed_shape": 2, "added": 1, "removed": 0, "renamed": 1, "type_changed": 0,
                  "share_changed": 2 / 3},
        "otro": {"tables_seen": 1, "tables_changed_shape": 1, "added": 0, "removed": 0, "renamed": 0, "type_changed": 1,
                 "share_changed": 1.0}}, "per schema", rate["by_schema"])

    # The store's clock, by hand: ventas changed 15 days ago, padron and fechas 8 days ago.
    today = datetime.date.fromisoformat(h.sq("SELECT (now() AT TIME ZONE 'UTC')::date::text")[0][0])
    c = h.connect(h.store_db)
    with c.cursor() as cur:
        for table, days in (("ventas", 15), ("padron", 8), ("fechas", 8)):
            cur.execute("UPDATE predrop.schema_snapshots SET captured_at = captured_at - %s * interval '1 day'"
                        " WHERE database_name = %s AND table_name = %s", (days, h.db, table))
    c.close()
    rate = report(h).get("rate", {})
    weekly = {w["week"]: w for w in rate.get("weekly", [])}
    weeks = [w["week"] for w in rate.get("weekly", [])]
    h.check(weeks and weeks[0] == monday(today - datetime.timedelta(days=30)) and weeks[-1] == monday(today)
            and all(datetime.date.fromisoformat(b) - datetime.date.fromisoformat(a) == datetime.timedelta(days=7)
                    for a, b in zip(weeks, weeks[1:])),
            "a week for every week of the 30-day window, the empty ones too", weeks)
    def counts(week):
        w = weekly.get(week, {})
        return (w.get("tables_seen"), w.get("tables_changed_shape"), w.get("added"), w.get("renamed"), w.get("type_changed"))
    w15, w8, w0 = (monday(today - datetime.timedelta(days=d)) for d in (15, 8, 0))
    expect = {w15: [1, 1, 1, 0, 0], w8: [2, 1, 0, 1, 0], w0: [1, 1, 0, 0, 1]}
    got = {w: list(counts(w)) for w in expect}
    h.check(got == expect, "each table counted in the week its change was captured", got)
    quiet = [w for w in weeks if w not in expect]
    h.check(all(weekly[w]["tables_seen"] == 0 for w in quiet), "the other weeks are empty",
            {w: weekly[w] for w in quiet})
    h.check(rate.get("overall") == want_overall, "moving the changes in time changes no total", rate.get("overall"))
    narrow = report(h, "--days", "7").get("rate", {})
    h.check(narrow.get("overall", {}).get("tables_seen") == 1 and narrow.get("window_days") == 7,
            "--days 7: only the change of this week (the type change)", narrow.get("overall"))

    text = report(h, fmt="text")
    h.check("rate of change: 4 table(s) seen recreated or altered, 3 changed shape (75%): 1 added a column, 0 removed one, "
            "1 renamed one, 1 changed a type" in text and "schema datos: 3 seen, 2 changed shape (67%)" in text
            and ("%s 2/1" % w8) in text, "the text form", text)

    # The HTML report: the chart's bars carry the JSON's weekly numbers, and Chromium draws it.
    out = os.path.join(h.work, "report.html")
    r = subprocess.run([h.bin, "report", "--store", h.store_conninfo(), "--format", "html", "--output", out],
                       capture_output=True, text=True, timeout=120)
    h.check(r.returncode == 0, "report --format html", (r.returncode, r.stderr))
    html = open(out).read() if os.path.exists(out) else ""
    bars = [(m.group(1), int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"<g class='week' data-week='([0-9-]+)' data-seen='(\d+)' data-changed='(\d+)'>", html)]
    h.check(bars == [(w["week"], w["tables_seen"], w["tables_changed_shape"]) for w in rate["weekly"]],
            "the chart has one group per week, with the JSON's numbers", bars)
    h.check("4 table(s) seen recreated or altered in the last 30 days; 3 of them changed shape (75%)" in html,
            "the HTML says the rate in words")
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chrome:
        h.fail("chromium not installed (scripts/install-deps.sh test)")
        return
    shot = os.path.join(h.work, "rate.png")
    subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    "--user-data-dir=" + os.path.join(h.work, "chrome-profile"), "--screenshot=" + shot,
                    "--window-size=1200,900", "file://" + out],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    png = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "check_png.py"), shot],
                         capture_output=True, text=True)
    h.check(png.returncode == 0, "Chromium drew the page (more than one colour)", png.stdout + png.stderr)
    print("# screenshot: " + shot)


if __name__ == "__main__":
    holdlib.main(test, "rate")
