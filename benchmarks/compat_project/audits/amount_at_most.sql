AUDIT (name amount_at_most);
SELECT * FROM @this_model WHERE @column > @limit
