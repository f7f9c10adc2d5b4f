MODEL (
  name shop.top_items,
  kind FULL
);

JINJA_QUERY_BEGIN;
SELECT
  item_name,
  {{ money('SUM(amount)') }} AS revenue,
  COUNT(*) AS orders
FROM shop.order_lines
WHERE quantity >= {{ var('min_quantity') }}
GROUP BY item_name
JINJA_END;
