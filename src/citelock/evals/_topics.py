"""Topic vocabularies for the seeded defect corpus: entities, fact templates, invented claims, questions.

Every template is plain data. A fact template renders into one sentence of a chunk; numeric slots are typed
(``int``, ``dec``, ``pct``, ``year``, ``big``) so a number can later be changed on purpose (``NUMBER_MISMATCH``).
Invented templates use verbs that no fact template uses, so an invented claim can never occur in a chunk.
Texts deliberately carry non-ASCII letters, typographic quotes, ``&`` and ``<`` (which the prompt template
escapes and the guard's normalization must undo).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TOPICS", "Topic"]


@dataclass(frozen=True)
class Topic:
    """The vocabulary of one topic.

    Attributes:
        name: Topic name.
        prefix: Chunk-id prefix (``fin`` → ``fin-017``).
        entities: Named entities the chunks talk about.
        places: Place names.
        people: Person names.
        numeric: Fact templates with at least one numeric slot ``{n_kind_k}``.
        plain: Fact templates without any digit.
        invented: Claim templates that no chunk ever states (no digits).
        extensions: Clauses that overreach when appended to a true fact (no digits).
        questions: Question templates (``{E}`` is the entity).
        synonyms: Word swaps that paraphrase a fact sentence (for non-verbatim spans).
    """

    name: str
    prefix: str
    entities: tuple[str, ...]
    places: tuple[str, ...]
    people: tuple[str, ...]
    numeric: tuple[str, ...]
    plain: tuple[str, ...]
    invented: tuple[str, ...]
    extensions: tuple[str, ...]
    questions: tuple[str, ...]
    synonyms: tuple[tuple[str, str], ...]


FINANCE = Topic(
    name="finance",
    prefix="fin",
    entities=(
        "Halvorsen & Søn",
        "Meridian Capital",
        "Banco Açores",
        "Kestrel Holdings",
        "Nordlys Energi",
        "Zürich Mutual",
        "Łódź Textiles",
        "Crestline & Vale",
        "Oakmont Trust",
        "Sakura Lending",
    ),
    places=("Oslo", "Lisbon", "Zürich", "Kraków", "São Paulo", "Montréal", "Göteborg", "Dublin"),
    people=("Ingrid Solberg", "José Carvalho", "Agnieszka Nowak", "Renée Dubois", "Kenji Watanabe"),
    numeric=(
        "{E} reported quarterly revenue of €{n_dec_1} million, up {n_pct_2}% year on year.",
        "{E} cut its dividend to {n_int_1} cents per share for {n_year_2}.",
        "Net debt at {E} fell to £{n_dec_1} million after the sale of its {P} unit.",
        "{E} kept leverage at {n_dec_1} times earnings, below the covenant limit of < {n_int_2} times.",
        "In {n_year_1}, {E} bought back {n_big_2} shares at an average price of ${n_dec_3}.",
        "Operating margin at {E} reached {n_pct_1}% in the {P} division.",
    ),
    plain=(
        "{E} appointed {N} as chief financial officer.",
        "{E} moved its treasury team from {P} to {Q}.",
        "Auditors described the “related party” note of {E} as incomplete.",
        "{E} & its lenders agreed to waive the interest-cover test.",
        "The board of {E} rejected a takeover approach from a rival in {P}.",
    ),
    invented=(
        "{E} plans to list its shares on the exchange in {P}.",
        "{E} is being investigated by regulators for insider trading.",
        "{N} resigned from {E} after a dispute with the chairman.",
        "{E} intends to merge with a competitor based in {P}.",
    ),
    extensions=("and margins expanded", "and the outlook was raised", "and the shares rallied"),
    questions=(
        "How did {E} perform financially?",
        "What do the sources say about the results of {E}?",
        "What happened to the balance sheet of {E}?",
    ),
    synonyms=(("reported", "posted"), ("cut", "lowered"), ("fell", "dropped"), ("appointed", "named")),
)

LAW = Topic(
    name="law",
    prefix="law",
    entities=(
        "the Høyesterett",
        "the Cour de cassation",
        "the Tribunal Supremo",
        "the Landgericht München",
        "the Sąd Najwyższy",
        "the Appellate Division",
        "the Conseil d’État",  # noqa: RUF001 (a typographic apostrophe on purpose)
        "the Commercial Court",
    ),
    places=("Bergen", "Lyon", "Sevilla", "München", "Gdańsk", "Genève", "Aarhus", "Coimbra"),
    people=("Judge Åsa Lind", "Judge Élodie Marchand", "Judge Tomás Ruiz", "Judge Zofia Wójcik"),
    numeric=(
        "In case {n_int_1}/{n_year_2}, {E} awarded damages of €{n_big_3} to the claimant.",
        "{E} reduced the sentence from {n_int_1} years to {n_int_2} years on appeal.",
        "The limitation period under section {n_int_1} was held to run for {n_int_2} months.",
        "{E} fined the operator €{n_dec_1} million for breaching the data rules in {n_year_2}.",
        "The appeal in {P} was filed {n_int_1} days after the judgment, within the {n_int_2}-day window.",
        "{E} ordered the landlord & tenant to share costs of €{n_big_1} equally.",
    ),
    plain=(
        "{E} held that the arbitration clause was void.",
        "{N} wrote the dissenting opinion in the {P} freight case.",
        "{E} ruled that the “force majeure” clause did not cover the port strike.",
        "The tribunal in {P} refused to enforce the foreign award.",
        "{E} sent the question of jurisdiction back to the lower court in {Q}.",
    ),
    invented=(
        "{E} overturned a previous ruling on copyright in {P}.",
        "{N} was removed from the bench for misconduct.",
        "{E} declared the new tax law unconstitutional.",
        "{E} allowed the class action against the airline to proceed.",
    ),
    extensions=("and awarded costs to the respondent", "and referred the case to Luxembourg"),
    questions=(
        "What did {E} decide?",
        "How did {E} rule on the appeal?",
        "What do the sources say about the judgments of {E}?",
    ),
    synonyms=(("held", "found"), ("awarded", "granted"), ("reduced", "shortened"), ("ruled", "decided")),
)

MEDICINE = Topic(
    name="medicine",
    prefix="med",
    entities=(
        "the Karolinska cohort",
        "the Québec trial",
        "the São João registry",
        "the Tromsø study",
        "the Łódź screening programme",
        "the Galway pilot",
        "the Kyōto follow-up",
        "the Malmö panel",
    ),
    places=("Stockholm", "Québec", "Porto", "Tromsø", "Łódź", "Galway", "Kyōto", "Malmö"),
    people=("Dr Märta Ek", "Dr Aoife Byrne", "Dr Luís Pereira", "Dr Hana Sato"),
    numeric=(
        "In {E}, {n_int_1} of {n_int_2} patients responded to a dose of {n_int_3} µg.",
        "{E} found systolic pressure fell by {n_int_1} mmHg after {n_int_2} weeks.",
        "Adverse events occurred in {n_pct_1}% of participants in {E}.",
        "{E} enrolled {n_big_1} adults aged {n_int_2} to {n_int_3} years.",
        "The relapse rate in {E} was {n_dec_1} per {n_int_2} patient-years, with HbA1c < {n_dec_3}%.",
        "Median survival in {E} was {n_dec_1} months, compared with {n_dec_2} months on placebo.",
    ),
    plain=(
        "{E} used a double-blind design with an active comparator.",
        "{N} led the safety review of {E}.",
        "Investigators in {P} described the rash as “mild & self-limiting”.",
        "{E} excluded patients with kidney disease.",
        "{E} recruited participants from clinics in {P} and {Q}.",
    ),
    invented=(
        "{E} was stopped early because of liver toxicity.",
        "{N} received a national award for the work on {E}.",
        "{E} showed the drug also prevents migraine.",
        "{E} was funded entirely by the manufacturer.",
    ),
    extensions=("and quality of life improved", "and no patient needed hospital care"),
    questions=(
        "What were the results of {E}?",
        "Was the treatment in {E} safe?",
        "What do the sources say about {E}?",
    ),
    synonyms=(("found", "showed"), ("occurred", "happened"), ("enrolled", "recruited"), ("led", "ran")),
)

LOGISTICS = Topic(
    name="logistics",
    prefix="log",
    entities=(
        "the Rotterdam terminal",
        "the Gdynia hub",
        "the Zeebrugge ferry line",
        "the Tromsø depot",
        "the Köln rail yard",
        "the Valparaíso port",
        "the Göteborg warehouse",
        "the Mersin gateway",
    ),
    places=("Rotterdam", "Gdynia", "Köln", "Valparaíso", "Göteborg", "Mersin", "Antwerpen", "Le Havre"),
    people=("Pieter de Vries", "Małgorzata Zielińska", "Søren Holm", "Inés Álvarez"),
    numeric=(
        "{E} handled {n_big_1} containers in {n_year_2}, up {n_pct_3}% on the year before.",
        "Average dwell time at {E} dropped to {n_dec_1} days.",
        "The freight clause caps liability at €{n_int_1} per kilogram for shipments via {E}.",
        "{E} added {n_int_1} electric cranes & {n_int_2} shunting engines.",
        "On-time departures at {E} reached {n_pct_1}% in week {n_int_2}.",
        "{E} charges a surcharge of €{n_int_1} for loads < {n_int_2} tonnes.",
    ),
    plain=(
        "{E} switched its customs filings to the new portal.",
        "{N} manages the night shift at {E}.",
        "{E} reroutes “high cube” boxes through {P} during storms.",
        "The strike at {E} ended after talks in {P}.",
        "{E} opened a cold-chain annex next to the {Q} ring road.",
    ),
    invented=(
        "{E} will close permanently next spring.",
        "{N} was fined for falsifying delivery records.",
        "{E} lost its customs licence after an audit.",
        "{E} signed an exclusive contract with a carrier from {P}.",
    ),
    extensions=("and congestion disappeared", "and shipping costs halved"),
    questions=(
        "How busy was {E}?",
        "What changed at {E}?",
        "What do the sources say about operations at {E}?",
    ),
    synonyms=(("handled", "moved"), ("dropped", "fell"), ("added", "bought"), ("switched", "moved")),
)

CLIMATE = Topic(
    name="climate",
    prefix="cli",
    entities=(
        "the Svalbard station",
        "the Jungfraujoch observatory",
        "the Mauna Loa record",
        "the Tromsø buoy",
        "the Ålesund tide gauge",
        "the Chacaltaya glacier survey",
        "the Péninsule Valdés transect",
        "the Abisko plot",
    ),
    places=("Longyearbyen", "Jungfraujoch", "Hilo", "Ålesund", "La Paz", "Abisko", "Tromsø", "Ushuaia"),
    people=("Dr Sigrid Aune", "Dr Matías Rojas", "Dr Leilani Kahale", "Dr Björn Ekström"),
    numeric=(
        "{E} measured a mean temperature of {n_dec_1} °C in {n_year_2}.",
        "Sea level at {E} rose {n_int_1} mm between {n_year_2} and {n_year_3}.",
        "{E} recorded CO₂ at {n_dec_1} ppm in May {n_year_2}.",
        "Ice thickness at {E} shrank by {n_pct_1}% over {n_int_2} years.",
        "{E} logged {n_int_1} days with frost & snow cover < {n_int_2} cm.",
        "Precipitation at {E} reached {n_big_1} mm, about {n_pct_2}% above normal.",
    ),
    plain=(
        "{E} replaced its sensors after the winter storm.",
        "{N} maintains the instruments at {E}.",
        "{E} is described as a “sentinel” site for Arctic warming.",
        "Researchers at {E} share data with a lab in {P}.",
        "{E} lost power for a week during the {Q} blackout.",
    ),
    invented=(
        "{E} will be relocated to a higher altitude.",
        "{N} disputed the calibration of the instruments at {E}.",
        "{E} detected methane leaks from a nearby pipeline.",
        "{E} is funded by an oil company from {P}.",
    ),
    extensions=("and the trend is accelerating", "and the glacier will vanish soon"),
    questions=(
        "What did {E} measure?",
        "What do the records of {E} show?",
        "What do the sources say about {E}?",
    ),
    synonyms=(("measured", "observed"), ("recorded", "logged"), ("rose", "climbed"), ("replaced", "swapped")),
)

TOPICS: tuple[Topic, ...] = (FINANCE, LAW, MEDICINE, LOGISTICS, CLIMATE)
