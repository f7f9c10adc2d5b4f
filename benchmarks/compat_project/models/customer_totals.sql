MODEL (
  name shop.customer_totals,
  kind FULL,
  grain customer_id,
  audits (
    assert_positive(column := total_amount)
  )
);

SELECT
  c.customer_id,
  c.name,
  c.region,
  c.vip,
  COUNT(o.order_id) AS order_count,
  COALESCE(SUM(o.amount), 0) + c.credit AS total_amount,
  MAX(o.order_date) AS last_order_date
FROM shop.customers AS c
LEFT JOIN shop.completed_orders AS o
  ON c.customer_id = o.customer_id
GROUP BY
  c.customer_id,
  c.name,
  c.region,
  c.vip,
  c.credit
