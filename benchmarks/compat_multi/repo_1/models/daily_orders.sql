MODEL (
  name bronze.daily_orders,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column order_date
  ),
  grain order_date
);

SELECT
  order_date,
  COUNT(*) AS orders,
  SUM(amount) AS revenue,
  @dup() AS source,
  @level AS level
FROM bronze.orders
WHERE
  order_date BETWEEN @start_date AND @end_date
GROUP BY
  order_date
