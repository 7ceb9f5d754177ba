-- Nexmark q11 (user sessions): bids per bidder in a SESSION window with a
-- 10-second gap. SESSION does not allow EMIT EARLY: a session's start moves
-- when sessions merge, so it is emitted once, when it closes (the watermark
-- passes its last bid + gap). Input: bench/gen --kind bids.
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP,
                    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW q11 AS
SELECT bidder, SESSION_START(date_time, INTERVAL '10' SECOND) AS window_start,
       SESSION_END(date_time, INTERVAL '10' SECOND) AS window_end,
       count(*) AS bid_count
FROM bids
GROUP BY bidder, SESSION(date_time, INTERVAL '10' SECOND);
