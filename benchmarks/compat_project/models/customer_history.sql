MODEL (
  name shop.customer_history,
  kind SCD_TYPE_2_BY_TIME (
    unique_key customer_id,
    updated_at_name updated_at
  )
);

SELECT
  customer_id,
  name,
  region,
  CAST(updated_at AS TIMESTAMP) AS updated_at
FROM shop.customers
