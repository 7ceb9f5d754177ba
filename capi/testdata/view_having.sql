-- A continuous view with a compound key and HAVING.
CREATE SOURCE events (
  event_id   VARCHAR,
  merchant   VARCHAR,
  customer   VARCHAR,
  amount     DOUBLE,
  event_time TIMESTAMP
) WITH (format = 'jsonl');

CREATE VIEW spenders AS
SELECT customer, merchant, count(*) AS n, sum(amount) AS spend
FROM events
GROUP BY customer, merchant
HAVING count(*) >= 2;
