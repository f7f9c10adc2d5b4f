MODEL (
  name shop.region_revenue,
  kind INCREMENTAL_BY_PARTITION,
  partitioned_by region
);

SELECT
  c.region,
  COUNT(*) AS orders,
  SUM(o.amount) AS revenue
FROM shop.order_lines AS o
JOIN shop.customers AS c
  ON o.customer_id = c.customer_id
GROUP BY
  c.region
