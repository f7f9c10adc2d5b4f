"""The raw tables the project reads as external models, created by `before_all` (config.py):
deterministic rows, so both engines start from the same data."""


def raw_orders() -> str:
    """28 orders, 4 a day from 2024-01-01 to 2024-01-07."""
    rows = []
    for day in range(7):
        for n in range(4):
            order_id = day * 4 + n + 1
            customer_id = (order_id * 7) % 5 + 1
            item_id = (order_id * 3) % 4 + 1
            quantity = (order_id % 3) + 1
            status = "cancelled" if order_id % 9 == 0 else "done"
            rows.append(
                f"({order_id}, {customer_id}, {item_id}, {quantity}, "
                f"CAST('2024-01-{day + 1:02d} {n * 5 + 1:02d}:15:00' AS TIMESTAMP), '{status}')"
            )
    return (
        "CREATE TABLE IF NOT EXISTS raw.orders AS SELECT * FROM (VALUES "
        + ", ".join(rows)
        + ") AS t(order_id, customer_id, item_id, quantity, order_ts, status)"
    )


BEFORE_ALL = [
    "CREATE SCHEMA IF NOT EXISTS raw",
    raw_orders(),
    "CREATE TABLE IF NOT EXISTS raw.stock AS "
    "SELECT * FROM (VALUES (1, 10), (2, 0), (3, 5), (4, 7)) AS t(item_id, units)",
]
VARIABLES = {"min_quantity": 1, "vip_bonus": 2.5}
