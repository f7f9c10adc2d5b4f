-- DuckDB functions and operators a DuckDB project uses, transpiled for other engines.
MODEL (
  name shop.order_calendar,
  kind FULL,
  grain order_id
);

SELECT
  order_id,
  order_ts::DATE AS order_day,
  STRFTIME(order_ts, '%Y-%m-%d %H') AS hour_text,
  DATE_TRUNC('month', order_ts) AS month_start,
  DAYOFWEEK(order_ts) AS day_of_week,
  quantity // 2 AS half_quantity,
  quantity / 2 AS exact_half,
  EPOCH(order_ts) AS epoch_seconds,
  status || '-' || order_id AS tag
FROM raw.orders
