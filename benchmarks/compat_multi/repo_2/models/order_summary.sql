MODEL (
  name silver.order_summary,
  kind FULL
);

SELECT
  SUM(orders) AS orders,
  SUM(revenue) AS revenue,
  MAX(source) AS upstream_source,
  @dup() AS source,
  @level AS level,
  @two() AS two
FROM bronze.daily_orders
