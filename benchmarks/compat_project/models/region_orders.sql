-- One model per region (blueprints).
MODEL (
  name shop.orders_@{region},
  kind FULL,
  blueprints (
    (region := 'north'),
    (region := 'south')
  )
);

SELECT
  o.order_id,
  o.customer_id,
  o.amount
FROM shop.order_lines AS o
JOIN shop.customers AS c
  ON o.customer_id = c.customer_id
WHERE
  c.region = @region
