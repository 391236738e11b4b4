"""Out-of-distribution probes for the triage family (F1): inputs a lexical guard should not admit.

Every probe is a :class:`Probe` ``(ticket, kind)``; the kinds are

* ``unseen-category`` — tickets of categories the training corpus lacks: the held-back
  ``shipping`` category (:data:`bench.triage.corpus.SHIFT_CATEGORY`) plus categories no label
  covers (legal, sales, hiring, press, partnerships, outage status, spam);
* ``foreign-language`` — tickets in Spanish, German and French (``language`` is ``es``/``de``/``fr``);
* ``flipped-meaning`` — paraphrases of training tickets whose request is negated or reversed
  ("refund me" vs "do not refund me, I only want to know ...");
* ``empty`` — the empty string and whitespace-only text;
* ``garbage`` — random printable bytes, punctuation runs, base64 blobs, emoji, control
  characters;
* ``very-long`` — 2 to 30 KiB of text: a real ticket buried in filler, or one sentence repeated.

The reference answer of a probe is what the simulator's oracle says
(:func:`bench.triage.oracle.triage_oracle`, i.e. the reference model at temperature 0); a probe is
*admitted* when the guard lets the tier-1 answer through. The texts are written for this bench;
the same seed always gives the same probes.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

from bench.triage import corpus
from bench.triage.oracle import triage_oracle

KINDS = ("unseen-category", "foreign-language", "flipped-meaning", "empty", "garbage", "very-long")
"""Probe kinds, in report order."""


@dataclass(frozen=True)
class Probe:
    """One out-of-distribution probe.

    Attributes:
        ticket: the input text (the task's ``ticket`` argument).
        kind: one of :data:`KINDS`.
        language: ISO 639-1 code for ``foreign-language`` probes, else ``None``.
        note: what the probe is (e.g. the unseen category's name).
    """

    ticket: str
    kind: str
    language: str | None = None
    note: str = ""

    def reference_answer(self) -> str:
        """The simulator oracle's label for this probe (the reference model at T=0)."""
        return triage_oracle(self.ticket)[0]


_UNSEEN = {
    "legal": [
        "Our lawyers need a copy of your data processing agreement before we sign the contract.",
        "Please send the subpoena response to our legal department by Friday.",
        "We received a cease and desist letter mentioning your trademark, who handles this?",
        "Can you confirm which jurisdiction governs the terms of service?",
        "Our counsel asks whether you are GDPR compliant as a processor.",
    ],
    "sales": [
        "We are a hospital group of 3,000 staff and would like a quote for a site license.",
        "Can I talk to a sales representative about volume pricing for schools?",
        "Do you have a reseller program in Brazil?",
        "Our procurement team needs a vendor questionnaire filled in.",
        "Is there a nonprofit discount for charities?",
    ],
    "hiring": [
        "I would like to apply for the backend engineer position listed on your careers page.",
        "Are you hiring interns for the summer?",
        "I interviewed last week and have not heard back from the recruiter.",
        "Please forward my CV to the head of design.",
    ],
    "press": [
        "I am a journalist writing about remote work tools, could your CEO comment?",
        "We would like to feature your company in our podcast next month.",
        "Where can I download your press kit and logo files?",
    ],
    "partnership": [
        "We build accounting software and want to discuss a co-marketing partnership.",
        "Would you sponsor our developer conference in Lisbon?",
        "Our agency wants to become an implementation partner.",
    ],
    "status": [
        "Is the service down right now for everyone in Europe?",
        "Your status page says operational but nobody in our office can reach the site.",
        "Will there be scheduled maintenance this weekend?",
    ],
    "spam": [
        "Congratulations! You have been selected to receive a free cruise, click here now.",
        "Buy cheap followers and boost your ranking today, limited offer.",
        "Dear sir, I am a prince and need your help moving ten million.",
    ],
}

_FOREIGN = {
    "es": [
        "Me cobraron dos veces la suscripción este mes, quiero que me devuelvan el dinero.",
        "La aplicación se cierra cada vez que abro el panel en mi teléfono.",
        "Sería genial tener modo oscuro en el calendario.",
        "No puedo iniciar sesión aunque cambié la contraseña dos veces.",
        "Recibí un aviso de inicio de sesión sospechoso desde otro país.",
        "Mi paquete no ha llegado después de tres semanas.",
        "¿Pueden cambiar la dirección de facturación de mis facturas?",
        "Al exportar a PDF el archivo sale dañado y no se abre.",
        "Por favor eliminen mi cuenta y todos mis datos.",
        "Alguien cambió mi contraseña sin mi permiso, creo que me hackearon.",
        "¿Podrían añadir una integración con nuestro calendario?",
        "El botón de guardar no responde y pierdo mis cambios.",
    ],
    "de": [
        "Mir wurde das Abonnement diesen Monat doppelt abgebucht, bitte erstatten Sie den Betrag.",
        "Die App stürzt jedes Mal ab, wenn ich das Dashboard öffne.",
        "Es wäre toll, wenn der Kalender einen Dunkelmodus hätte.",
        "Ich kann mich nicht anmelden, obwohl ich das Passwort zweimal zurückgesetzt habe.",
        "Ich habe eine verdächtige Anmeldung aus einem anderen Land bemerkt.",
        "Mein Paket ist nach drei Wochen immer noch nicht angekommen.",
        "Bitte ändern Sie die Rechnungsadresse auf meinen Rechnungen.",
        "Der Export als Tabelle erzeugt eine beschädigte Datei.",
        "Bitte löschen Sie mein Konto und alle meine Daten.",
        "Jemand hat ohne meine Erlaubnis mein Passwort geändert.",
        "Könnten Sie eine Anbindung an unser Ticketsystem hinzufügen?",
        "Die Seite lädt endlos und bricht dann mit einem Fehler ab.",
    ],
    "fr": [
        "J'ai été débité deux fois pour mon abonnement ce mois-ci, merci de me rembourser.",
        "L'application plante à chaque fois que j'ouvre le tableau de bord.",
        "Ce serait super d'avoir un mode sombre dans le calendrier.",
        "Je n'arrive pas à me connecter malgré deux réinitialisations du mot de passe.",
        "J'ai reçu une alerte de connexion suspecte depuis un autre pays.",
        "Mon colis n'est toujours pas arrivé après trois semaines.",
        "Pouvez-vous modifier l'adresse de facturation sur mes factures ?",
        "L'export en PDF produit un fichier corrompu qui ne s'ouvre pas.",
        "Merci de supprimer mon compte et toutes mes données.",
        "Quelqu'un a changé mon mot de passe sans ma permission.",
        "Pourriez-vous ajouter une intégration avec notre messagerie ?",
        "Le bouton enregistrer ne répond pas et je perds mes modifications.",
    ],
}

# (in-distribution request, the same words with the meaning negated or reversed)
_FLIPPED = [
    ("Please refund the $49 charge from last week.",
     "Do not refund the $49 charge from last week, I only want to know why it appeared."),
    ("I was charged twice for my Pro subscription, refund the duplicate.",
     "I was not charged twice for my Pro subscription, I just want to confirm there is no duplicate."),
    ("Please delete my account and all my data.",
     "Please do not delete my account or any of my data, I was only asking how deletion works."),
    ("I cannot log in even though I reset my password twice.",
     "I can log in fine now, no need to reset my password, thanks for the earlier help."),
    ("It would be great if the dashboard supported dark mode.",
     "Please do not add dark mode to the dashboard, the current theme is exactly what we want."),
    ("Could you add an option to export reports as CSV?",
     "You already added an option to export reports as CSV, thank you, nothing else needed."),
    ("The app crashes every time I open it on my iPhone 14.",
     "The app no longer crashes when I open it on my iPhone 14, the update fixed it."),
    ("I got a suspicious login alert from another country, was my account hacked?",
     "The login alert from another country was me on holiday, my account was not hacked."),
    ("Someone changed my password without my permission.",
     "Nobody changed my password, I did it myself with my own permission, ignore the alert."),
    ("My invoice shows $120.00 but my plan should cost less.",
     "My invoice shows $120.00 and that is correct, I only need a copy for my records."),
    ("Please cancel my subscription before the renewal.",
     "Please do not cancel my subscription, I want the renewal to go through as usual."),
    ("Exporting to PDF produces a corrupted file that will not open.",
     "Exporting to PDF works perfectly now, the file opens, you can close my old bug report."),
    ("Please change the email address on my account.",
     "Keep the email address on my account as it is, I withdraw my earlier change request."),
    ("I think my API key leaked in a public repository, how do I revoke it?",
     "My API key did not leak, I checked the repository, there is nothing to revoke."),
    ("Please add an integration with Slack, our whole team uses it.",
     "We stopped using Slack, so please ignore our request for an integration."),
    ("My payment failed and now the account shows an overdue balance.",
     "My payment went through and the account shows no overdue balance, just saying thanks."),
    ("I am locked out of my account after too many login attempts.",
     "I am not locked out anymore, the login attempts counter reset itself."),
    ("The sync with Salesforce stopped working and throws an exception.",
     "The sync with Salesforce works again without any exception, good job."),
]

_FILLER = [
    "Some background on our setup follows.", "We use the product across three offices.",
    "Our IT team reviewed this internally.", "I am writing this during a long commute.",
    "Below is a copy of our internal notes.", "The weather here has been unusual lately.",
    "Our quarterly planning starts next week.", "I will summarize the situation as best I can.",
    "Several colleagues have opinions on this.", "Let me describe the timeline in detail.",
]

_EMOJI = ["🙂", "🔥", "📦", "💳", "🐛", "🔒", "✨", "🚀", "😡", "🤔", "👍", "🎉", "📉", "🧾"]


def _garbage(rng: random.Random, i: int) -> tuple[str, str]:
    style = i % 6
    if style == 0:
        return "".join(rng.choice(string.printable[:94]) for _ in range(rng.randint(12, 120))), "random printable ASCII"
    if style == 1:
        return "".join(rng.choice("!?.,;:-_*#@%&()[]{}<>/\\|~^") for _ in range(rng.randint(5, 80))), "punctuation"
    if style == 2:
        raw = bytes(rng.getrandbits(8) for _ in range(rng.randint(16, 96)))
        return base64.b64encode(raw).decode("ascii"), "base64"
    if style == 3:
        return "".join(rng.choice(_EMOJI) for _ in range(rng.randint(1, 30))), "emoji"
    if style == 4:
        raw = bytes(rng.getrandbits(8) for _ in range(rng.randint(16, 64)))
        return raw.decode("latin-1"), "random bytes as latin-1 text"
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(4, 40))), "random CJK ideographs"


def generate_probes(seed: int = 0) -> list[Probe]:
    """The out-of-distribution probe set (deterministic for a seed; 150 probes).

    Counts per kind: ``unseen-category`` 36 (26 hand-written in seven categories no label covers
    plus 10 ``shipping`` tickets from the corpus generator), ``foreign-language`` 36 (12 each in
    es/de/fr), ``flipped-meaning`` 18, ``empty`` 6, ``garbage`` 36, ``very-long`` 18.

    Args:
        seed: RNG seed for generated parts (shipping tickets, garbage, long-text assembly).

    Returns:
        The probes in kind order (:data:`KINDS`); texts are distinct within a kind.
    """
    rng = random.Random(seed + 7919)
    out: list[Probe] = []
    for cat, texts in _UNSEEN.items():
        out.extend(Probe(t, "unseen-category", note=cat) for t in texts)
    for t in corpus.generate(10, seed=seed + 31, categories=(corpus.SHIFT_CATEGORY,), mix_rate=0.0):
        out.append(Probe(t.ticket, "unseen-category", note=corpus.SHIFT_CATEGORY))
    for lang, texts in _FOREIGN.items():
        out.extend(Probe(t, "foreign-language", language=lang, note=lang) for t in texts)
    out.extend(Probe(flipped, "flipped-meaning", note=f"flips: {orig}") for orig, flipped in _FLIPPED)
    for t, note in (("", "empty string"), (" ", "one space"), ("\n", "newline"), ("\t\t", "tabs"),
                    ("   \n   \t  ", "mixed whitespace"), ("\u00a0\u2003", "unicode spaces")):
        out.append(Probe(t, "empty", note=note))
    seen: set[str] = set()
    i = 0
    while sum(1 for p in out if p.kind == "garbage") < 36:
        text, note = _garbage(rng, i)
        i += 1
        if text not in seen:
            seen.add(text)
            out.append(Probe(text, "garbage", note=note))
    base = corpus.generate(18, seed=seed + 37)
    for j, t in enumerate(base):
        target = rng.randint(2048, 30 * 1024)
        if j % 2 == 0:
            parts: list[str] = []
            while sum(len(p) + 1 for p in parts) < target:
                parts.append(rng.choice(_FILLER))
            parts.insert(rng.randint(0, len(parts)), t.ticket)
            out.append(Probe(" ".join(parts), "very-long", note=f"one {t.category} ticket in {target} chars of filler"))
        else:
            reps = max(2, target // (len(t.ticket) + 1))
            out.append(Probe(" ".join([t.ticket] * reps), "very-long", note=f"one {t.category} ticket repeated {reps} times"))
    return out
