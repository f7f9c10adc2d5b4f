{% macro money(expr) %}ROUND({{ expr }}, 2){% endmacro %}
