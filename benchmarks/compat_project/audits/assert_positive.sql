AUDIT (
  name assert_positive
);

SELECT
  *
FROM @this_model
WHERE
  @column <= 0
