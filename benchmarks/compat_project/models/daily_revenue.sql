MODEL (
  name shop.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  ),
  start '2024-01-01',
  grain order_date,
  audits (
    revenue_not_negative
  )
);

SELECT
  order_date,
  COUNT(*) AS orders,
  SUM(amount) AS revenue
FROM shop.order_lines
WHERE
  order_date BETWEEN @start_date AND @end_date
GROUP BY
  order_date;

AUDIT (
  name revenue_not_negative
);

SELECT
  *
FROM @this_model
WHERE
  revenue < 0
