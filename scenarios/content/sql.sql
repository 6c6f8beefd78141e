-- Schema of the analytics warehouse the SQL tenant queries.
CREATE TABLE customers (customer_id BIGINT PRIMARY KEY, name TEXT, region TEXT, signup_date DATE, plan TEXT);
CREATE TABLE orders (order_id BIGINT PRIMARY KEY, customer_id BIGINT REFERENCES customers, order_ts TIMESTAMP, status TEXT, total_cents BIGINT);
CREATE TABLE order_items (order_id BIGINT REFERENCES orders, sku TEXT, quantity INT, unit_price_cents BIGINT);
CREATE TABLE products (sku TEXT PRIMARY KEY, category TEXT, launched_on DATE, list_price_cents BIGINT);
CREATE TABLE sessions (session_id UUID PRIMARY KEY, customer_id BIGINT, started_at TIMESTAMP, ended_at TIMESTAMP, device TEXT);

-- Monthly revenue per region with a running total.
SELECT c.region,
       date_trunc('month', o.order_ts) AS month,
       SUM(o.total_cents) / 100.0 AS revenue,
       SUM(SUM(o.total_cents)) OVER (PARTITION BY c.region ORDER BY date_trunc('month', o.order_ts)) / 100.0 AS running_revenue
FROM orders o
JOIN customers c ON c.customer_id = o.customer_id
WHERE o.status = 'completed'
GROUP BY c.region, date_trunc('month', o.order_ts)
ORDER BY c.region, month;

-- Top three products per category by units sold in the last 90 days.
WITH sold AS (
  SELECT p.category, oi.sku, SUM(oi.quantity) AS units
  FROM order_items oi
  JOIN orders o ON o.order_id = oi.order_id
  JOIN products p ON p.sku = oi.sku
  WHERE o.order_ts >= now() - INTERVAL '90 days'
  GROUP BY p.category, oi.sku
), ranked AS (
  SELECT category, sku, units, ROW_NUMBER() OVER (PARTITION BY category ORDER BY units DESC) AS rn
  FROM sold
)
SELECT category, sku, units FROM ranked WHERE rn <= 3 ORDER BY category, rn;

-- Customers whose order value fell by more than half quarter over quarter.
SELECT customer_id, quarter, value, prev_value
FROM (
  SELECT o.customer_id,
         date_trunc('quarter', o.order_ts) AS quarter,
         SUM(o.total_cents) AS value,
         LAG(SUM(o.total_cents)) OVER (PARTITION BY o.customer_id ORDER BY date_trunc('quarter', o.order_ts)) AS prev_value
  FROM orders o
  GROUP BY o.customer_id, date_trunc('quarter', o.order_ts)
) q
WHERE prev_value IS NOT NULL AND value < prev_value / 2;

-- Session length percentiles by device.
SELECT device,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM ended_at - started_at)) AS p50_s,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM ended_at - started_at)) AS p99_s
FROM sessions
WHERE ended_at IS NOT NULL
GROUP BY device;

-- Retention: share of each signup cohort that ordered again within 30 days.
SELECT date_trunc('week', c.signup_date) AS cohort,
       COUNT(DISTINCT c.customer_id) AS customers,
       COUNT(DISTINCT o.customer_id) FILTER (WHERE o.order_ts < c.signup_date + INTERVAL '30 days') AS retained
FROM customers c
LEFT JOIN orders o ON o.customer_id = c.customer_id
GROUP BY 1
ORDER BY 1;
