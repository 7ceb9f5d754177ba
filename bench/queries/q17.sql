-- Nexmark q17 (auction statistics), as a continuous view: per auction and
-- day, the bid count and min, max, avg and sum of the price. No window:
-- every group stays live; emission is coalesced to once a second per
-- changed group. Input: bench/gen --kind bids.
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP,
                    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW q17 AS
SELECT auction, CAST(date_time AS DATE) AS day,
       count(*) AS total_bids, min(price) AS min_price, max(price) AS max_price,
       avg(price) AS avg_price, sum(price) AS sum_price
FROM bids
GROUP BY auction, CAST(date_time AS DATE)
EMIT EARLY EVERY INTERVAL '1' SECOND;
