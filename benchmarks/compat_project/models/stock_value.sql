MODEL (
  name shop.stock_value,
  kind FULL
);

SELECT
  s.item_id,
  i.item_name,
  s.units * i.price AS stock_value
FROM raw.stock AS s
JOIN shop.items AS i
  ON s.item_id = i.item_id
