-- No `start`: SQLMesh backfills it from the plan's start, not just the last interval.
MODEL (
  name shop.daily_revenue_rollup,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  ),
  grain order_date
);

SELECT
  order_date,
  orders,
  revenue,
  ROUND(revenue / orders, 4) AS revenue_per_order
FROM shop.daily_revenue
WHERE
  order_date BETWEEN @start_date AND @end_date
