"""Real prose for the metric tests: paragraphs written for this project in each language, none
repeating another, so that a test answer made of them is written in the language and is no
loop (a sentence repeated thirty times is degenerate under the rule, and not kept)."""

FRENCH = [
    "La photosynthèse est le processus par lequel les plantes fabriquent leur propre nourriture. Les feuilles "
    "captent la lumière du soleil grâce à un pigment vert appelé chlorophylle. Avec cette énergie, la plante "
    "transforme l'eau puisée par les racines et le dioxyde de carbone de l'air en sucre, qui sert de carburant "
    "pour grandir, et elle rejette de l'oxygène dans l'atmosphère.",
    "Pour réussir une pâte à crêpes, mélangez d'abord la farine et une pincée de sel dans un grand saladier. "
    "Creusez un puits au centre, cassez-y les œufs et versez le lait petit à petit en fouettant sans arrêt, "
    "afin d'éviter les grumeaux. Laissez ensuite reposer la pâte une heure au frais avant de la cuire dans une "
    "poêle bien chaude et légèrement beurrée.",
    "Le système solaire compte huit planètes qui tournent autour d'une étoile de taille moyenne. Les quatre "
    "premières sont rocheuses et assez petites, tandis que les quatre suivantes sont des géantes composées "
    "surtout de gaz et de glace. Entre Mars et Jupiter se trouve une ceinture d'astéroïdes, vestige des débuts "
    "de notre voisinage cosmique.",
    "Apprendre une langue étrangère demande de la régularité plutôt que de longues séances. Quinze minutes par "
    "jour suffisent souvent pour progresser, à condition de répéter le vocabulaire à voix haute et de lire des "
    "textes simples. Regarder des films sous-titrés aide aussi à habituer l'oreille aux accents et au rythme "
    "des phrases.",
    "Au Moyen Âge, les villes étaient entourées de remparts qui protégeaient les habitants contre les pillards. "
    "Les rues étaient étroites et sinueuses, bordées de maisons à colombages dont les étages avançaient au-dessus "
    "de la chaussée. Les marchés se tenaient sur les places, près de l'église, et attiraient les paysans des "
    "villages voisins.",
    "Pour économiser l'énergie à la maison, il vaut mieux éteindre les appareils plutôt que de les laisser en "
    "veille. Baisser le chauffage d'un degré réduit sensiblement la facture, et des rideaux épais gardent la "
    "chaleur pendant la nuit. Enfin, laver le linge à basse température use moins les vêtements et consomme "
    "moins d'électricité.",
    "Le sommeil joue un rôle essentiel dans la mémoire. Pendant la nuit, le cerveau trie les informations de la "
    "journée et renforce celles qui comptent. Un adulte a besoin de sept à neuf heures de repos, et se coucher "
    "à heure fixe aide l'organisme à trouver son propre rythme, même pendant les vacances.",
    "Les abeilles sont indispensables à l'agriculture, car elles transportent le pollen d'une fleur à l'autre. "
    "Sans elles, de nombreux fruits et légumes deviendraient rares et chers. Les pesticides, la disparition des "
    "haies et certains parasites menacent aujourd'hui les colonies, ce qui inquiète beaucoup les apiculteurs.",
]

ENGLISH = [
    "Photosynthesis is the process by which plants make their own food. Leaves capture sunlight with a green "
    "pigment called chlorophyll, and with that energy the plant turns water from its roots and carbon dioxide "
    "from the air into sugar, which fuels its growth, while it releases oxygen into the atmosphere.",
    "To make a good pancake batter, first mix the flour and a pinch of salt in a large bowl. Make a well in the "
    "centre, crack the eggs into it and pour in the milk little by little while whisking all the time, so that "
    "no lumps form. Then let the batter rest for an hour before cooking it in a hot, lightly buttered pan.",
    "The solar system has eight planets that travel around a star of middling size. The first four are rocky "
    "and fairly small, whereas the next four are giants made mostly of gas and ice. Between Mars and Jupiter "
    "lies a belt of asteroids, a remnant of the early days of our cosmic neighbourhood.",
    "Learning a foreign language takes regular practice rather than long sessions. Fifteen minutes a day is "
    "often enough to make progress, as long as you repeat new words aloud and read simple texts. Watching films "
    "with subtitles also helps your ear get used to accents and to the rhythm of sentences.",
    "In the Middle Ages, towns were surrounded by walls that protected people against raiders. Streets were "
    "narrow and winding, lined with timber-framed houses whose upper floors jutted out over the road. Markets "
    "were held in the squares near the church and drew farmers from the surrounding villages.",
    "To save energy at home, switch devices off instead of leaving them on standby. Turning the heating down by "
    "one degree lowers the bill noticeably, and thick curtains keep the warmth in at night. Finally, washing "
    "clothes at a low temperature wears them out less and uses less electricity.",
]

RUSSIAN = [
    "Фотосинтез — это процесс, при котором растения сами создают себе пищу. Листья улавливают солнечный свет с "
    "помощью зелёного пигмента хлорофилла. Используя эту энергию, растение превращает воду, которую впитывают "
    "корни, и углекислый газ из воздуха в сахар, а в атмосферу выделяет кислород.",
    "Чтобы приготовить хорошее тесто для блинов, сначала смешайте муку и щепотку соли в большой миске. Сделайте "
    "углубление в центре, разбейте туда яйца и понемногу вливайте молоко, постоянно помешивая, чтобы не было "
    "комков. Потом дайте тесту постоять час и жарьте блины на горячей сковороде.",
    "Солнечная система состоит из восьми планет, которые вращаются вокруг звезды среднего размера. Первые четыре "
    "планеты каменистые и довольно маленькие, а следующие четыре — гиганты из газа и льда. Между Марсом и "
    "Юпитером находится пояс астероидов, оставшийся с ранних времён.",
    "Изучение иностранного языка требует регулярности, а не долгих занятий. Пятнадцати минут в день часто "
    "достаточно, чтобы продвигаться вперёд, если повторять новые слова вслух и читать простые тексты. Фильмы с "
    "субтитрами тоже помогают привыкнуть к произношению и ритму речи.",
]

HINDI = [
    "प्रकाश संश्लेषण वह प्रक्रिया है जिसमें पौधे अपना भोजन खुद बनाते हैं। पत्तियाँ हरे रंग के पदार्थ की मदद से सूरज की "
    "रोशनी को पकड़ती हैं। इस ऊर्जा से पौधा जड़ों से आए पानी और हवा की कार्बन डाइऑक्साइड को चीनी में बदलता है और "
    "वातावरण में ऑक्सीजन छोड़ता है।",
    "अच्छी रोटी बनाने के लिए पहले आटे में थोड़ा नमक मिलाइए और धीरे धीरे पानी डालकर नरम आटा गूंथिए। आटे को आधे घंटे "
    "तक ढककर रख दीजिए। फिर छोटी लोई बनाकर बेलिए और गरम तवे पर दोनों तरफ से सेंकिए, जब तक रोटी फूल न जाए।",
    "सौर मंडल में आठ ग्रह हैं जो एक मध्यम आकार के तारे के चारों ओर घूमते हैं। पहले चार ग्रह चट्टानी और छोटे हैं, जबकि "
    "बाकी चार बड़े ग्रह ज़्यादातर गैस और बर्फ से बने हैं। मंगल और बृहस्पति के बीच छोटे पत्थरों की एक पट्टी भी है।",
    "कोई नई भाषा सीखने के लिए लंबे समय तक पढ़ने से ज़्यादा ज़रूरी है रोज़ थोड़ा अभ्यास करना। हर दिन पंद्रह मिनट काफ़ी "
    "होते हैं, अगर आप नए शब्द ज़ोर से दोहराएँ और आसान कहानियाँ पढ़ें। उपशीर्षक वाली फ़िल्में देखने से भी कान को "
    "उच्चारण की आदत पड़ती है।",
]

CHINESE = [
    "光合作用是植物自己制造食物的过程。叶子里的叶绿素能够吸收太阳光，植物利用这些能量，把根部吸收的水和空气中的二氧化碳"
    "转化为糖，同时向空气中释放氧气。",
    "做一份好吃的煎饼，首先要把面粉和少许盐放进大碗里搅拌均匀。然后在中间打入鸡蛋，一边慢慢倒入牛奶一边不停地搅拌，"
    "这样面糊里就不会有疙瘩。面糊静置一个小时以后，再放进抹了油的热锅里煎熟。",
    "太阳系有八颗行星，它们围绕着一颗中等大小的恒星运转。前四颗行星是岩石行星，体积比较小；后四颗是巨大的行星，主要由"
    "气体和冰组成。火星和木星之间还有一条小行星带，是太阳系形成初期留下的。",
    "学习外语需要坚持，而不是偶尔长时间地学习。每天学习十五分钟往往就足够了，只要大声朗读新单词，并且阅读简单的文章。"
    "看带字幕的电影也能帮助耳朵熟悉不同的口音和说话的节奏。",
]


def text(paragraphs: list[str], n: int) -> str:
    """The first ``n`` paragraphs (cycling through them as whole paragraphs would loop: ``n``
    is at most their number), joined as an answer's paragraphs."""
    if n > len(paragraphs):
        raise ValueError(f"only {len(paragraphs)} distinct paragraphs")
    return "\n\n".join(paragraphs[:n])


def numbered_list(items: list[str]) -> str:
    """``items`` as a numbered Markdown list under a French lead-in, as a model writes one."""
    return "Voici ce que je vous propose :\n\n" + "\n\n".join(f"{k}. {item}" for k, item in enumerate(items, 1))
