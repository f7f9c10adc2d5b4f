MODEL (
  name shop.completed_orders,
  kind EMBEDDED
);

SELECT
  order_id,
  customer_id,
  order_date,
  amount
FROM shop.order_lines
WHERE
  status = 'done'
