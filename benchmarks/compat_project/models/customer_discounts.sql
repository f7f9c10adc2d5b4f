-- An audit with a user macro in its argument, and one naming this model itself.
MODEL (
  name shop.customer_discounts,
  kind FULL,
  grain customer_id,
  audits (
    amount_at_most(column := discounted, limit := @max_order_amount()),
    discounts_have_customers
  )
);

SELECT
  customer_id,
  COUNT(*) AS lines,
  SUM(discounted) AS discounted
FROM shop.discounted_lines
GROUP BY
  customer_id
