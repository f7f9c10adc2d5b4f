MODEL (
  name shop.customer_region_history,
  kind SCD_TYPE_2_BY_COLUMN (
    unique_key customer_id,
    columns [region, vip]
  )
);

SELECT
  customer_id,
  region,
  vip
FROM shop.customers
