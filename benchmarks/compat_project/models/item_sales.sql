-- Quoted column names with spaces.
MODEL (
  name shop.item_sales,
  kind FULL
);

SELECT
  item_name AS "item name",
  SUM(quantity) AS "units sold",
  SUM(gross) AS gross,
  @share(SUM(gross), SUM(SUM(gross)) OVER ()) AS "share pct"
FROM shop.order_lines
GROUP BY
  item_name
