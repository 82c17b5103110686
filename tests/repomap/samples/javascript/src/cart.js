import { priceWithTax, formatPrice } from './prices.js';

export class Cart {
  constructor() {
    this.items = [];
  }

  addItem(name, amount) {
    this.items.push({ name, amount });
    return this;
  }

  total() {
    return this.items.reduce((sum, item) => sum + priceWithTax(item.amount), 0);
  }

  receipt() {
    return this.items.map((item) => `${item.name}: ${formatPrice(item.amount)}`).join('\n');
  }
}
