MODEL (
  name shop.recent_orders,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  ),
  start '2024-01-05'
);

SELECT
  order_id,
  CAST(order_ts AS DATE) AS order_date
FROM raw.orders
WHERE
  CAST(order_ts AS DATE) BETWEEN @start_date AND @end_date
