"""Java's FAQUrl (org.apache.rocketmq.common.help.FAQUrl): the FAQ link some NameServer remarks end with.

Of the NameServer's replies, only GET_ROUTEINFO_BY_TOPIC's TOPIC_NOT_EXIST (17) carries it: ClientRequestProcessor
(DefaultRequestProcessor in 4.x) appends `FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)` to "No topic route info in
name server for the topic: …" (ClusterTestRequestProcessor does the same, in a mode this service has no counterpart
of). The client's MQClientException passes a remark through `FAQUrl.attachDefaultURL`, which adds its own
"\\nFor more information, please visit the url, <url>" only when the remark lacks the "\\nSee " of suggestTodo: so a
remark without the suffix prints differently in mqadmin and every Java client's exception.

The URL is 5.1's and later (every FAQUrl constant has been this one page since then); 4.9 and 5.0 linked
http://rocketmq.apache.org/docs/faq/ (docs/deviations.md "FAQ link").
"""

from __future__ import annotations

DEFAULT_FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
APPLY_TOPIC_URL = DEFAULT_FAQ_URL


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo: the suffix, newline first."""
    return f"\nSee {url} for further details."


def no_route_remark(topic: str | None) -> str:
    """TOPIC_NOT_EXIST's remark for a route read, byte for byte Java's (a missing topic is Java's `null`)."""
    return f"No topic route info in name server for the topic: {topic or 'null'}" + suggest_todo(APPLY_TOPIC_URL)
