#!/usr/bin/env python3
"""Create the schema and one day of orders and payments with a known number of differences.

    ./seed-data.py --dsn "$SETTLE_DSN" --date 2026-10-28 --orders 5000 --differences 37

Deterministic: the same --seed, --date and counts give the same rows, amounts and differences.
Re-seeding a day replaces that day's orders and payments.

Differences are of the two kinds settle.py reports: an order without any payment
(`missing_payment`) and a payment whose amount differs (`amount_mismatch`). The neighbouring
days get orders and differences of their own (--neighbours per day), so a job that ignores
CRONWRAP_BIZ_DATE, or compares the wrong day, finds the wrong count. A neighbouring day that
already has orders is left alone (so seeding the 29th after the 28th keeps the 28th).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import psycopg

SHANGHAI = timezone(timedelta(hours=8))
HERE = Path(__file__).resolve().parent


def day_rows(day: date, orders: int, differences: int, seed: int):
    """(orders, payments, difference ids) for one day; order ids sort in creation order."""
    if not 0 <= differences <= orders:
        raise SystemExit(f"seed-data: --differences must be between 0 and --orders ({orders})")
    rng = random.Random(f"{seed}:{day.isoformat()}")
    ids = [f"{day:%Y%m%d}-{i:07d}" for i in range(1, orders + 1)]
    odd = set(rng.sample(ids, differences))
    order_rows, payment_rows = [], []
    start = datetime.combine(day, time(0), SHANGHAI)
    for order_id in ids:
        amount = Decimal(rng.randint(100, 5_000_00)) / 100
        order_rows.append((order_id, day, amount))
        if order_id in odd and rng.random() < 0.5:
            continue  # missing payment
        paid = amount
        if order_id in odd:
            paid = amount + Decimal(rng.choice([-1, 1]) * rng.randint(1, 500)) / 100
            if paid <= 0:
                paid = amount + Decimal("0.01")
        payment_rows.append((order_id, paid, start + timedelta(seconds=rng.randint(0, 86399))))
    rng.shuffle(order_rows)  # insertion order must not matter to the keyset scan
    return order_rows, payment_rows, odd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("SETTLE_DSN"),
                        help="business database (default: $SETTLE_DSN)")
    parser.add_argument("--date", required=True, type=date.fromisoformat, help="biz date YYYY-MM-DD")
    parser.add_argument("--orders", type=int, default=5000)
    parser.add_argument("--differences", type=int, default=37)
    parser.add_argument("--neighbours", type=int, default=None,
                        help="orders on each neighbouring day (default: orders/10)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--schema", type=Path, default=HERE / "schema.sql")
    parser.add_argument("--no-schema", action="store_true", help="do not (re)apply schema.sql")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn or SETTLE_DSN is required")
    neighbours = args.orders // 10 if args.neighbours is None else args.neighbours

    days = [(args.date, args.orders, args.differences)]
    for other in (args.date - timedelta(days=1), args.date + timedelta(days=1)):
        days.append((other, neighbours, min(neighbours, 3)))

    with psycopg.connect(args.dsn, autocommit=False) as conn:
        if not args.no_schema:
            conn.execute(args.schema.read_text())
        for index, (day, n, k) in enumerate(days):
            if index and conn.execute("SELECT 1 FROM orders WHERE biz_date = %s LIMIT 1",
                                      (day,)).fetchone():
                continue
            orders, payments, _ = day_rows(day, n, k, args.seed)
            prefix = f"{day:%Y%m%d}-%"
            conn.execute("DELETE FROM payments WHERE order_id LIKE %s", (prefix,))
            conn.execute("DELETE FROM orders WHERE biz_date = %s OR order_id LIKE %s", (day, prefix))
            with conn.cursor() as cur:
                with cur.copy("COPY orders (order_id, biz_date, amount) FROM STDIN") as copy:
                    for row in orders:
                        copy.write_row(row)
                with cur.copy("COPY payments (order_id, amount, paid_at) FROM STDIN") as copy:
                    for row in payments:
                        copy.write_row(row)
        conn.commit()
    missing = args.orders - len(day_rows(args.date, args.orders, args.differences, args.seed)[1])
    print(f"seeded {args.date}: {args.orders} orders, {args.differences} differences "
          f"({args.differences - missing} amount mismatches, {missing} missing payments), "
          f"seed {args.seed}; {neighbours} orders on each neighbouring day")
    return 0


if __name__ == "__main__":
    sys.exit(main())
