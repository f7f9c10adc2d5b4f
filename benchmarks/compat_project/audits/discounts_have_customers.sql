-- Names its own model instead of @this_model: SQLMesh resolves it to the table under audit.
AUDIT (name discounts_have_customers);
SELECT * FROM shop.customer_discounts WHERE customer_id IS NULL
