-- EMBEDDED, and calling a user macro: the macro renders inside the models that inline it.
MODEL (
  name shop.discounted_lines,
  kind EMBEDDED
);

SELECT
  order_id,
  customer_id,
  @cents(amount * 2) AS discounted
FROM shop.order_lines
