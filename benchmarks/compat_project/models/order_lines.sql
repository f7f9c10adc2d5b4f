MODEL (
  name shop.order_lines,
  kind VIEW,
  owner shop_team,
  description 'One row per order, priced',
  audits (
    not_null(columns := (order_id, amount)),
    accepted_values(column := status, is_in := ('done', 'cancelled'))
  )
);

SELECT
  o.order_id,
  o.customer_id,
  o.item_id,
  i.item_name,
  o.quantity,
  o.order_ts,
  CAST(o.order_ts AS DATE) AS order_date,
  o.status,
  o.quantity * i.price AS gross,
  @net_amount(o.quantity * i.price, 0.1) AS amount
FROM raw.orders AS o
JOIN shop.items AS i
  ON o.item_id = i.item_id
WHERE
  o.quantity >= @min_quantity
