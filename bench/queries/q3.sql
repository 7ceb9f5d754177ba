-- Nexmark q3 (local item suggestion) in ubik's model: auctions in category
-- 10 joined with their seller's person version valid at the auction's time
-- (an event-time temporal join: persons are a versioned table, and a person
-- who moved is in the state they lived in when the auction opened), for
-- sellers in Oregon, Idaho and California; counted per state, city and
-- 10-second TUMBLE. Inputs: bench/gen --kind auction (the stream, --input)
-- and bench/gen --kind person (the table, read from person.jsonl in the
-- script's folder; bench/run runs a copy of the script where it links it).
CREATE SOURCE auction (id BIGINT, item_name VARCHAR, seller BIGINT, category BIGINT, initial_bid BIGINT, reserve BIGINT,
                       date_time TIMESTAMP, expires TIMESTAMP,
                       WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE TABLE person (id BIGINT, name VARCHAR, email VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP,
                     PRIMARY KEY (id) NOT ENFORCED,
                     WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'person.jsonl');

CREATE VIEW q3 AS
SELECT p.state, p.city, TUMBLE_START(a.date_time, INTERVAL '10' SECOND) AS window_start,
       count(*) AS auctions, count(DISTINCT a.seller) AS sellers, sum(a.initial_bid) AS initial_bids
FROM auction a
JOIN person FOR SYSTEM_TIME AS OF a.date_time AS p ON a.seller = p.id
WHERE a.category = 10 AND (p.state = 'OR' OR p.state = 'ID' OR p.state = 'CA')
GROUP BY p.state, p.city, TUMBLE(a.date_time, INTERVAL '10' SECOND)
EMIT EARLY EVERY INTERVAL '1' SECOND;
