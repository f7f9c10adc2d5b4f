-- No `start`: it starts where its parents start (shop.recent_orders: 2024-01-05), not earlier.
MODEL (
  name shop.recent_daily,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  )
);

SELECT
  CAST(o.order_ts AS DATE) AS order_date,
  COUNT(*) AS orders,
  COUNT(r.order_id) AS recent_orders
FROM raw.orders AS o
LEFT JOIN shop.recent_orders AS r
  ON o.order_id = r.order_id
WHERE
  CAST(o.order_ts AS DATE) BETWEEN @start_date AND @end_date
GROUP BY
  CAST(o.order_ts AS DATE)
