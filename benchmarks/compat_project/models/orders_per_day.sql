-- No `start`, and no parent with one (raw.orders is external): what does the first plan backfill?
MODEL (
  name shop.orders_per_day,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  )
);

SELECT
  CAST(order_ts AS DATE) AS order_date,
  COUNT(*) AS orders
FROM raw.orders
WHERE
  CAST(order_ts AS DATE) BETWEEN @start_date AND @end_date
GROUP BY
  CAST(order_ts AS DATE)
