-- Built-in audits beyond the common ones.
MODEL (
  name shop.order_stats,
  kind FULL,
  audits (
    accepted_range(column := orders, min_v := 1, max_v := 100),
    not_constant(column := customer_id),
    string_length_between(column := item_name, min_v := 3, max_v := 10),
    unique_combination_of_columns(columns := (customer_id, item_name))
  )
);

SELECT
  customer_id,
  MIN(item_name) AS item_name,
  COUNT(*) AS orders,
  MIN(order_id) AS first_order_id,
  MAX(order_id) AS last_order_id
FROM shop.order_lines
GROUP BY
  customer_id
