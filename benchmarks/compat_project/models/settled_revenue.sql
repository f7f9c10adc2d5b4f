MODEL (
  name shop.settled_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  ),
  start '2024-01-01',
  signals (
    settled_before(cutoff := '2024-01-05')
  )
);

SELECT
  order_date,
  revenue
FROM shop.daily_revenue
WHERE
  order_date BETWEEN @start_date AND @end_date
